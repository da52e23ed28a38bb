"""The tests marked ``slow``: out of the fast contributor command, run by CI.

``python -m pytest -m "not slow"`` is the fast command (under 4 minutes on 2 cores); CI
runs everything. A test is slow here when one run of it (or of one of its parameters)
took a second or more on the loaded 2-core machine: load tests, tests that wait out a
timeout or a connect timeout on purpose, exhaustive interruption sweeps, whole matrices of
entry points and levels, a Ray cluster, servers started and stopped per test. Chosen from
``--durations=0`` (2026-12-05, load average 2-9): the first pass took the full suite's
770 s to a fast command of 356 s, the second to 209 s; a third covers tests merged since.
When the fast command grows past 4 minutes, run it with ``--durations=30`` and add here.

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
    # a second pass (the fast command at 356 s, load average 2-9): whatever still took a
    # second or more, mostly a server or an interpreter started and stopped per test
    "tests/agent/test_pipeline.py::test_batch_timeout_through_the_pipeline",
    "tests/batch/test_batch_local.py::test_concurrency_is_bounded_and_tasks_are_pulled_lazily",
    "tests/batch/test_batch_local.py::test_results_for_success_error_timeout_and_session",
    "tests/bench/test_bench_end_to_end.py::test_data_workflow_batched_serial_and_programmatic",
    "tests/bench/test_bench_end_to_end.py::test_two_runs_count_the_same_tokens",
    "tests/bench/test_bench_reproduce.py::test_a_subset_regenerates_the_committed_rows",
    "tests/cli/test_cli_extras.py::test_the_blocker_is_what_makes_them_fail",
    "tests/cli/test_cli_options.py::test_config_is_taken_before_or_after_the_command",
    "tests/cli/test_cli_text.py::test_a_one_call_benchmark_says_call_and_workflow",
    "tests/engine/test_engine_compat_messages.py::test_timeout_output_ends_with_the_"
    "reference_line",
    "tests/engine/test_engine_execute.py::test_a_ready_said_just_before_a_fast_exit_is_seen",
    "tests/engine/test_engine_execute.py::test_hanging_tool_does_not_hang_past_timeout",
    "tests/engine/test_engine_execute.py::test_interrupt_from_another_thread_escalates",
    "tests/engine/test_engine_execute.py::test_never_hello_child_is_killed",
    "tests/engine/test_engine_execute.py::test_timeout_keeps_output_and_kills_sigterm_ignorer",
    "tests/engine/test_engine_tool_cli.py::test_cli_run",
    "tests/engine/test_sessions_lifecycle.py::test_closing_the_engine_under_a_cell_stuck_"
    "in_a_c_loop",
    "tests/engine/test_sessions_lifecycle.py::test_fifty_sessions_twenty_cells_from_"
    "threads_no_cross_talk",
    "tests/engine/test_workspace_owner.py::test_a_refactoring_as_root_in_roots_project",
    "tests/mcp/test_catalogue.py::test_500_tools_model_catalogue_under_1000_tokens_and_"
    "scripts_still_reach_them",
    "tests/mcp/test_catalogue.py::test_below_the_threshold_tools_are_offered_directly",
    "tests/mcp/test_cli.py::test_tools_and_doctor_show_server_state",
    "tests/mcp/test_client.py::test_crash_mid_call_gives_a_clear_error_and_the_server_"
    "comes_back",
    "tests/mcp/test_client.py::test_eager_server_ignores_the_cache",
    "tests/mcp/test_client.py::test_env_expansion_reaches_the_server_not_the_script",
    "tests/mcp/test_client.py::test_lazy_server_with_a_cached_catalogue_starts_on_first_call",
    "tests/mcp/test_client.py::test_servers_stop_when_the_registry_closes",
    "tests/mcp/test_client.py::test_tools_registered_callable_from_scripts_and_results_decoded",
    "tests/mcp/test_host_death.py::test_a_killed_host_takes_its_stdio_server_and_its_"
    "strays_along",
    "tests/mcp/test_reactor.py::test_a_sync_mcp_call_from_an_async_tool_is_refused_not_"
    "deadlocked",
    "tests/mcp/test_reactor.py::test_two_managers_and_async_tools_share_one_reactor",
    "tests/mcp/test_real_servers.py::test_git_server_called_from_a_script",
    "tests/mcp/test_real_servers.py::test_time_server_called_from_a_script",
    "tests/mcp/test_server.py::test_an_http_server_as_a_tool_source_with_a_token_header",
    "tests/mcp/test_server.py::test_binding_beyond_loopback_without_a_token_is_refused",
    "tests/mcp/test_server.py::test_http_token_is_required_and_checked",
    "tests/mcp/test_server.py::test_stdio",
    "tests/mcp/test_server.py::test_streamable_http_on_loopback",
    "tests/remote/test_ssh_doctor.py::test_doctor_checks_the_remote_and_sees_the_runtime_"
    "installed",
    "tests/remote/test_ssh_doctor.py::test_doctor_text_output",
    "tests/remote/test_ssh_remote.py::test_an_unknown_host_key_is_refused",
    "tests/remote/test_ssh_remote.py::test_sigterm_comes_first",
    "tests/remote/test_ssh_terminal.py::test_commands_run_remotely_and_cd_sticks",
    "tests/remote/test_ssh_terminal.py::test_pty_commands_get_a_terminal_on_the_remote",
    "tests/remote/test_ssh_terminal.py::test_timeout_kills_the_remote_command_and_its_strays",
    "tests/remote/test_ssh_tools.py::test_file_tools_reconnect_after_a_dropped_connection",
    "tests/remote/test_ssh_tools.py::test_results_match_the_local_ones",
    "tests/rpc/test_rpc_hostile.py::test_a_peer_that_never_reads_is_no_longer_read_and_"
    "others_go_on",
    "tests/rpc/test_rpc_hostile.py::test_late_reader_of_5000_pipelined_calls_loses_nothing",
    "tests/rpc/test_rpc_hung_calls.py::test_a_queued_call_waits_a_bounded_time",
    "tests/rpc/test_rpc_inline.py::test_the_loop_does_not_poll_when_executions_could_use_"
    "every_cpu",
    "tests/rpc/test_rpc_inline.py::test_with_spin_0_the_loop_sleeps_between_messages",
    "tests/rpc/test_rpc_server.py::test_concurrent_calls_run_in_parallel_and_match_ids",
    "tests/security/test_network_allowlist.py::test_only_listed_domains_are_reachable",
    "tests/security/test_redteam_host_cpu.py::test_no_host_cpu_after_the_script_ends",
    "tests/security/test_redteam_mcp.py::test_hostile_json_rpc_over_stdio_gets_one_reply_each",
    "tests/security/test_redteam_mcp.py::test_two_mcp_clients_do_not_share_a_kernel",
    "tests/security/test_redteam_mcp_auth.py::test_another_uid_cannot_use_the_server",
    "tests/security/test_redteam_mcp_auth.py::test_negative_control_the_same_client_with_"
    "the_token_gets_the_shell",
    "tests/security/test_redteam_paths.py::test_path_tricks_stay_in_the_roots",
    "tests/terminal/test_local.py::test_commands_do_not_outlive_a_killed_host",
    "tests/test_proctree.py::test_backend_timeout_leaves_no_process_of_the_command",
    "tests/test_registry.py::test_a_registry_with_open_services_warns_when_collected",
    "tests/tools/test_terminal_tool.py::test_timeout_and_cap",
    # a third pass, over the tests merged since (the fast command at 3 min 51 s)
    "tests/engine/test_sessions.py::test_one_session_cannot_reach_another_sessions_files_"
    "or_process",
    "tests/engine/test_sessions.py::test_hostile_cells_cannot_confuse_the_host",
    "tests/engine/test_sessions.py::test_the_kernel_runs_under_the_levels_limits",
    "tests/security/test_redteam_ownership.py::test_a_swapped_temporary_file_does_not_"
    "redirect_the_hosts_chmod",
    "tests/security/test_redteam_remote.py::test_the_host_never_waits_for_a_frame_larger_"
    "than_the_helper_writes",
    "tests/remote/test_ssh_sessions.py::test_the_channel_is_taken_apart_exactly",
    "tests/remote/test_ssh_sessions.py::test_a_session_keeps_its_state_on_the_remote",
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
