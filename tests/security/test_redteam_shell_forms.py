"""Red team: shell forms that ran a hard-blocked command and passed the matcher silently.

Under ``approvals.mode: ask`` each of these was *safe* to the matcher, so the host's
terminal ran it without asking: ``{rm,-rf,/}`` (bash expands the braces into ``rm -rf /``),
``sh <<< 'rm -rf /'`` and ``. /dev/stdin <<< ...`` (a here-string is the shell's script),
``busybox rm -rf /``, ``set -- rm -rf /; "$@"`` and ``x() { "$@"; }; x rm -rf /`` (the
positional parameters, dropped as empty, are the command), ``source <(echo rm -rf /)`` (a
shell running a command's output), and ``export X='rm -rf /'; bash -c '$X'`` (a nested
script's unknown command word was dropped as the outer lexer's to judge). Now the ones
whose command is known are hard-blocked (no approver is even asked), the others ask.

Through :func:`check_command` as the terminal tool calls it, with nobody to ask and with a
host approver that says "always", sandboxed or not. Negative controls: the same command
written plainly hits the same hard block; harmless neighbours of each form (``echo
{a,b}``, ``cat <<< hello``, ``echo "$@"``, ``busybox ls``) still pass.
"""

from __future__ import annotations

import pytest

from execengine.approval.matcher import assess

from .shellforms import check_hard_blocked, check_passes, refused_unasked

# (attack, the same command written plainly, the hard block both must hit)
BLOCKED = [
    ("{rm,-rf,/}", "rm -rf /", "rm_vital"),
    ("rm -rf /{bin,etc}", "rm -rf /bin /etc", "rm_vital"),
    ("sh <<< 'rm -rf /'", "rm -rf /", "rm_vital"),
    (". /dev/stdin <<< 'rm -rf /'", "rm -rf /", "rm_vital"),
    ("busybox rm -rf /", "rm -rf /", "rm_vital"),
    ("toybox dd if=/dev/zero of=/dev/sda", "dd if=/dev/zero of=/dev/sda", "disk_dd"),
]
# the command is only known when it runs: never silent
ASKED = [
    'set -- rm -rf /; "$@"',
    'x() { "$@"; }; x rm -rf /',
    "bash -c '\"$@\"' sh rm -rf /",
    "source <(echo rm -rf /)",
    "bash <(echo rm -rf /)",
    "sh < <(echo rm -rf /)",
    "export X='rm -rf /'; bash -c '$X'",
    "X='rm -rf /' bash -c '$X'",
    "export X=rm; eval '$X -rf /'",
]
HARMLESS = ["echo {a,b}", "ls {src,tests}", "cat <<< hello", 'echo "$@"', "busybox ls",
            "bash -c 'x=ls; $x'", "sh script.sh", "grep -r foo {src,tests}/"]


@pytest.mark.parametrize(("attack", "plain", "key"), BLOCKED, ids=[a for a, _, _ in BLOCKED])
def test_the_form_is_hard_blocked(attack: str, plain: str, key: str) -> None:
    check_hard_blocked(attack, key)


@pytest.mark.parametrize(("attack", "plain", "key"), BLOCKED, ids=[p for _, p, _ in BLOCKED])
def test_negative_control_the_plain_command_hits_the_same_block(attack: str, plain: str,
                                                                key: str) -> None:
    assert key in {p.key for p in assess(plain).blocked}


@pytest.mark.parametrize("command", ASKED)
def test_a_command_known_only_when_it_runs_asks(command: str) -> None:
    found = assess(command)
    assert not found.safe, found.normalized
    verdict = refused_unasked(command)  # approvals.mode: ask, nobody to ask
    assert verdict.status in ("denied", "blocked"), verdict


@pytest.mark.parametrize("command", HARMLESS)
def test_negative_control_harmless_neighbours_pass(command: str) -> None:
    check_passes(command)
