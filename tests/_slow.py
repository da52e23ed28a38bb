"""The tests marked ``slow``: out of the fast contributor command, run by CI.

``python -m pytest -m "not slow"`` is the fast command (under 4 minutes on 2 cores); CI
runs everything. A test is slow here when one run of it (or of its family of parameters)
takes seconds on a loaded 2-core machine: load tests, tests that wait out a timeout or a
connect timeout on purpose, exhaustive interruption sweeps, whole matrices of entry points
and levels, a Ray cluster. Measured with ``--durations=0`` on the full suite (2026-12-05,
load average 2.5-3.5): these entries were about 380 of its 770 s.

Listed here rather than decorated in each module, so that one place says what the fast
command leaves out (and helpers editing the same test modules do not collide on markers).
An entry is a test module, or a test function in it (every parameter of it); an entry
that matches nothing while its module was collected is an error, so the list cannot go
stale silently. ``@pytest.mark.slow`` on a test works as well.
"""

from __future__ import annotations

import pytest

SLOW: tuple[str, ...] = (
    # load
    "tests/engine/test_engine_load.py",
    "tests/security/test_redteam_mcp_fairness.py",
    "tests/engine/test_engine_memory.py",
    "tests/rpc/test_rpc_hostile.py::test_fuzz_of_100k_frames_while_another_execution_keeps_"
    "its_replies",
    # matrices: every entry point, every level, every way to die
    "tests/equivalence/test_equivalence.py::test_case_through_entry_point",
    "tests/isolation/test_host_death.py",
    "tests/mcp/test_host_death.py::test_a_killed_host_takes_a_nested_engine_and_all_it_"
    "holds_along",
    "tests/mcp/test_lifeline.py::test_the_parent_death_signal_alone_ends_a_server_with_its_"
    "host",
    "tests/engine/test_engine_exit.py",
    # exhaustive sweeps of interruption points
    "tests/security/test_redteam_zmtp_signals.py",
    # a Ray cluster
    "tests/batch/test_batch_ray.py",
    # waiting out a timeout, a connect timeout or a grace period on purpose
    "tests/security/test_redteam_proxy.py::test_the_proxy_port_on_another_address_is_"
    "unreachable",
    "tests/security/test_redteam_sessions.py::test_a_process_started_after_its_cell_dies_"
    "with_the_session",
    "tests/security/test_redteam_cell_end.py",
    "tests/engine/test_engine_output_kept.py",
    "tests/cli/test_cli_output_kept.py",
    "tests/engine/test_sessions.py::test_a_cell_that_will_not_stop_costs_the_state",
    "tests/engine/test_sessions.py::test_closing_the_engine_ends_a_running_cell",
    "tests/engine/test_sessions.py::test_a_timeout_during_a_tool_call_keeps_the_state",
    "tests/engine/test_sessions.py::test_all_kernels_busy_refuses_a_new_session_after_"
    "waiting_its_timeout",
    "tests/engine/test_sessions_lifecycle.py::test_a_kernel_that_never_says_ready_is_"
    "killed_and_reported",
    "tests/engine/test_engine_ending.py::test_the_result_says_which_step_ended_the_script",
    "tests/security/test_network_allowlist.py::test_a_sessions_cells_keep_their_proxy_bridge",
    "tests/security/test_redteam_search.py::test_a_backtracking_pattern_does_not_freeze_the_"
    "host",
    "tests/security/test_redteam_search.py::test_the_glob_is_catastrophic_for_re",
    "tests/security/test_redteam_search.py::test_the_pattern_is_catastrophic_for_re",
    "tests/security/test_functional.py::test_timeout_kills_everything",
    "tests/security/test_attacks.py::test_cpu_loop_is_stopped",
    "tests/security/test_attacks.py::test_no_privilege_gain",
    "tests/security/test_redteam_today.py::test_a_flooded_bridge_leaves_the_host_and_the_"
    "next_execution_whole",
    "tests/security/test_redteam_today.py::test_the_warm_pool_never_mixes_allowlist_and_"
    "closed_entries",
    "tests/security/test_deputy.py::test_terminal_from_a_script_is_sandboxed",
    "tests/security/test_redteam_clone_parent.py::test_a_clone_parent_child_is_gone_when_"
    "the_result_comes",
    "tests/security/test_redteam_rpc_inline.py::test_alternating_fast_and_slow_calls_cannot_"
    "keep_the_loop_busy",
    "tests/security/test_redteam_mcp.py::test_execute_code_at_none_with_nobody_to_ask_is_"
    "blocked",
    "tests/security/test_redteam_mcp.py::test_http_on_loopback_refuses_a_rebound_host_or_a_"
    "foreign_origin",
    "tests/isolation/test_spawner_requests.py::test_a_launch_whose_entry_is_slow_to_start_"
    "holds_up_no_other",
    "tests/isolation/test_template.py::test_the_cpu_an_interpreter_used_stays_in_the_hosts_"
    "accounting",
    "tests/isolation/test_prestart.py::test_a_folder_a_pth_file_names_that_appears_with_the_"
    "plan",
    "tests/mcp/test_client.py::test_server_that_never_starts_fails_clearly_and_others_work",
    "tests/mcp/test_client.py::test_hung_call_times_out_while_other_calls_proceed_on_the_"
    "same_connection",
    "tests/remote/test_ssh_tools.py::test_a_remote_script_calls_every_tool_on_remote_files",
    "tests/remote/test_ssh_tools.py::test_project_mode_scripts_run_where_the_task_is",
    "tests/remote/test_ssh_remote.py::test_timeout_leaves_nothing_on_the_remote",
    "tests/remote/test_ssh_doctor.py::test_a_server_refusing_socket_forwarding_is_reported",
    "tests/bench/test_bench_end_to_end.py::test_shell_strategies_answer_with_one_or_two_"
    "commands",
    "tests/sandbox/test_sandbox_client.py::test_idle_reader_steps_in_for_waiting_asyncio_"
    "calls",
)


def mark(items: list[pytest.Item]) -> None:
    """Mark the items :data:`SLOW` names; an entry naming nothing of a collected module
    is a :class:`pytest.UsageError`."""
    modules = {item.nodeid.split("::")[0] for item in items}
    used: set[str] = set()
    for item in items:
        name = item.nodeid.split("[")[0]
        for entry in SLOW:
            if name == entry or name.startswith(entry + "::"):
                item.add_marker(pytest.mark.slow)
                used.add(entry)
                break
    stale = [e for e in SLOW if e not in used and e.split("::")[0] in modules]
    if stale:
        raise pytest.UsageError(f"tests/_slow.py names tests that do not exist: {stale}")
