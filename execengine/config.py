"""Typed, immutable configuration.

One YAML file, ``config.yaml``, is found by (first match wins): an explicit path, then
``$EXECENGINE_CONFIG``, then ``~/.execengine/config.yaml``; with none of them, the defaults
below apply. It is parsed once into the frozen dataclasses of this module; the rest of the
library only ever sees these objects.

Every option is declared with :func:`option`: its type (choices are ``Literal`` types), its
default, a one-line doc (shown by ``execengine config show`` and in the README's reference)
and its range. The loader in :mod:`execengine._configload` and the dataclasses themselves
(``__post_init__``) validate against exactly these declarations, so a section built in code,
``CodeExecutionConfig(timeout=-1)``, fails like the same value in config.yaml, and a new
option is one line here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from execengine import _configload
from execengine._configcheck import bad_placeholder, choices_of, field_types, validate_section
from execengine.errors import ConfigError

IsolationLevel = Literal["none", "restricted", "isolated"]
ISOLATION_LEVELS: tuple[IsolationLevel, ...] = get_args(IsolationLevel)
Mode = Literal["project", "strict"]
MODES: tuple[Mode, ...] = get_args(Mode)
#: the longest wall-clock limit an execution or a command may be given, seconds (30 days:
#: beyond it a limit is a mistake, and 1e308 would overflow the CPU-time rlimit)
MAX_TIMEOUT = 30 * 86400.0


def is_timeout(value: Any) -> bool:
    """Whether ``value`` is a wall-clock limit in seconds: a finite number (not a bool) in
    (0, MAX_TIMEOUT]. The one check for every place a limit comes in (an argument in code,
    a batch line, a script's terminal call); config.yaml's go through the option bounds."""
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and math.isfinite(value) and 0 < value <= MAX_TIMEOUT)


def checked_timeout(value: Any, what: str = "timeout") -> float:
    """``value`` as a wall-clock limit in seconds (:func:`is_timeout`); else
    :class:`ConfigError` (an argument given in code, checked as the config's are)."""
    if not is_timeout(value):
        raise ConfigError(f"{what} must be a positive number of seconds up to "
                          f"{MAX_TIMEOUT:g} (30 days), got {value!r}")
    return float(value)


def option(
    default: Any,
    doc: str,
    *,
    min: float | None = None,
    max: float | None = None,
    secret: bool = False,
) -> Any:
    """Declare a config option (a dataclass field with validation metadata)."""
    meta = {"doc": doc, "min": min, "max": max, "secret": secret}
    if isinstance(default, (list, dict, set)):
        raise TypeError("use a tuple or a section for mutable defaults")
    return field(default=default, metadata=meta)


def section(cls: type, doc: str) -> Any:
    """Declare a nested section."""
    return field(default_factory=cls, metadata={"doc": doc, "section": True})


def named_sections(cls: type, doc: str) -> Any:
    """Declare a mapping of user-chosen names to sections of type ``cls`` (``mcp_servers``)."""
    return field(default_factory=dict, metadata={"doc": doc, "named": cls})


def string_map(doc: str, *, secret: bool = False) -> Any:
    """Declare an option holding a mapping of strings to strings (environment, headers)."""
    return field(default_factory=dict, metadata={"doc": doc, "string_map": True,
                                                 "secret": secret})


class _Section:
    """Validates its options when built (in code or from YAML)."""

    #: the dotted key of the section, for error messages
    KEY = ""

    def __post_init__(self) -> None:
        validate_section(self, self.KEY)


@dataclass(frozen=True)
class CodeExecutionConfig(_Section):
    KEY = "code_execution"

    mode: Mode = option(
        "project",
        "project: the session's cwd and project interpreter, the cwd's packages importable "
        "(after the standard library and installed ones); strict: host interpreter in a "
        "private staging directory",
    )
    timeout: float = option(300.0, "wall-clock limit of one execution, seconds", min=0.1,
                            max=MAX_TIMEOUT)
    max_tool_calls: int = option(50, "tool calls allowed per execution", min=0)
    max_stdout_bytes: int = option(
        50_000, "stdout kept (head 40 % + tail 60 %); the rest is spilled to a file", min=256
    )
    max_stderr_bytes: int = option(10_000, "stderr kept (head + tail)", min=256)
    kill_grace: float = option(5.0, "seconds between SIGTERM and SIGKILL", min=0.0, max=60.0)
    hello_timeout: float = option(
        10.0, "seconds a started child has to connect and say hello before it is killed",
        min=0.1,
    )
    # 128 and 256: 100 I/O-bound calls gathered by one script overlap (16 ran them in seven
    # waves: 362 ms for 100 calls of 50 ms, 109 ms at 128), and one execution still holds
    # at most half the workers; idle threads cost ~16 kB each and start on demand
    max_parallel_tool_calls: int = option(
        128, "tool calls of one execution running on the host at once (more wait their turn)",
        min=1, max=256,
    )
    max_tool_threads: int = option(
        256, "host worker threads for the tool calls of all executions of one engine; when "
        "all are busy (e.g. hung calls of ended executions) a call gets an error result",
        min=1, max=1024,
    )
    max_message_bytes: int = option(
        16 * 1024 * 1024, "largest RPC message accepted from a child", min=4096
    )
    max_inflight_bytes: int = option(
        256 * 1024 * 1024, "most bytes the tool calls in flight may hold over all executions "
        "of one engine (messages of 64 KiB or more count); a call past it gets an error "
        "result at once, but a call is never refused while no other counts", min=4096,
    )
    rpc_spin: float = option(
        0.0005, "seconds the host's RPC loop polls for a script's next call after a message "
        "before it sleeps, while fewer executions run than the host has CPUs (0: never); "
        "halves a fast call's round trip, but other host threads may wait up to the "
        "interpreter's switch interval (5 ms) for the interpreter lock meanwhile",
        min=0.0, max=0.01,
    )
    spill_max_age_hours: float = option(
        24.0, "spill files (full stdout of truncated runs) older than this are deleted at "
        "engine start", min=0.0,
    )
    spill_max_mb: int = option(
        512, "spill files beyond this total are deleted at engine start, oldest first", min=0
    )
    python: str | None = option(
        None, "interpreter for project mode (default: $VIRTUAL_ENV, $CONDA_PREFIX, host)"
    )
    tz: str | None = option(None, "TZ passed to the child")
    isolation: Literal["auto", "none", "restricted", "isolated"] = option(
        "auto", "OS isolation level"
    )
    min_isolation: IsolationLevel | None = option(
        None, "fail instead of running below this level"
    )
    launcher: str | None = option(
        None, "a launcher by name from the execengine.launchers entry-point group (default: "
        "the chosen isolation level's; ssh with terminal.backend ssh)"
    )
    network: bool = option(False, "allow network access from scripts at level isolated")
    memory_mb: int = option(1024, "memory limit of one execution, MiB", min=16)
    cpu_seconds: int | None = option(
        None, "CPU-time limit (default: timeout rounded up, plus 1)", min=1
    )
    max_processes: int = option(64, "processes one execution may run at once", min=2)
    max_file_mb: int = option(1024, "largest file a script may write, MiB", min=1)
    tmp_mb: int = option(256, "size of the private /tmp at level isolated, MiB", min=1)
    warm_entries: int = option(
        2, "sandboxes (restricted, isolated) entered ahead of the next launches of each "
        "kind (scripts, terminal commands), at isolated a script's with its interpreter "
        "started once a script has run; at none, scripts' interpreters started ahead "
        "(about 10 MiB each); 0: enter every sandbox, start every interpreter at launch",
        min=0)
    fork_server: bool = option(
        True, "at level isolated as root, with the host's own interpreter: the interpreters "
        "started ahead are forked from one started once (its start-up, site and .pth hooks "
        "included, runs once, as root, in a view of only the system's and the "
        "interpreter's folders), not each started afresh; off: each starts on its own "
        "(about 40 ms more CPU per execution here; the executions then differ in address "
        "layout and hash seed)")
    recycle_entries: bool = option(
        True, "at level isolated with cgroups: an entry's namespaces and root serve the "
        "next executions after a reset that leaves nothing of the one before (its binds "
        "detached, fresh /tmp, /dev/shm and IPC namespace, the pid counter back to 1, "
        "fresh Landlock rules; its cgroup and uid slot are new for each), instead of being "
        "made anew for each; off: new namespaces and root for every execution")
    workdir_as_owner: bool = option(
        True, "kept for compatibility (the default since the working directory behaves as "
        "the user's own project): at restricted and isolated as root the script, its "
        "commands and its file tools act in each writable root as the folder's owner (an "
        "id-mapped bind; what they create is the owner's); false: the sandbox's own uid "
        "there, as before (it creates files and changes only what it made or others may "
        "write). See docs/confinement.md")
    session_idle_timeout: float = option(
        1800.0, "seconds a session's kernel may stay idle before it is closed", min=0.1
    )
    max_sessions: int = option(
        8, "session kernels alive at once (the least recently used idle one is closed to "
        "make room)", min=1,
    )


@dataclass(frozen=True)
class TerminalConfig(_Section):
    KEY = "terminal"

    backend: Literal["local", "ssh"] = option(
        "local", "where commands and scripts run: this machine, or the ssh section's remote "
        "(execute_code's children and the file tools run there too)")
    cwd: str | None = option(None, "working directory of new sessions (default: process cwd)")
    env_passthrough: tuple[str, ...] = option(
        (), "environment variables passed to children even if they look secret"
    )
    timeout: float = option(180.0, "default foreground command timeout, seconds", min=0.1,
                            max=MAX_TIMEOUT)
    max_output_chars: int = option(50_000, "command output kept (head + tail)", min=256)
    kill_grace: float = option(2.0, "seconds between SIGTERM and SIGKILL", min=0.0, max=60.0)
    max_background: int = option(16, "background processes running at once", min=1)
    background_buffer_chars: int = option(
        200_000, "output kept per background process (ring buffer)", min=1024
    )
    isolation: Literal["none", "auto", "restricted", "isolated"] = option(
        "none", "sandbox for the agent's own terminal commands (commands from execute_code "
        "scripts always run at the script's level): none, auto or a level",
    )


@dataclass(frozen=True)
class ApprovalsConfig(_Section):
    KEY = "approvals"

    mode: Literal["ask", "smart", "deny", "allow"] = option(
        "ask",
        "ask: prompt (deny when nobody can answer); smart: classifier, then ask; "
        "deny: refuse flagged commands; allow: run them (hard blocks still refused)",
    )
    command_allowlist: tuple[str, ...] = option(
        (), "dangerous-pattern descriptions approved permanently"
    )
    timeout: float = option(60.0, "seconds to wait for an answer before denying", min=1.0)
    execute_code: Literal["auto", "ask", "allow", "deny"] = option(
        "auto",
        "approval of whole execute_code scripts before they start: auto: run without asking "
        "when sandboxed (isolation restricted or isolated) with tool calls checked like the "
        "agent's own, else ask; ask: ask per approvals.mode (deny when nobody can answer); "
        "allow: run every script; deny: never run scripts",
    )


@dataclass(frozen=True)
class ToolsetsConfig(_Section):
    KEY = "toolsets"

    enabled: tuple[str, ...] | None = option(None, "toolsets offered (default: all)")
    disabled: tuple[str, ...] = option((), "toolsets removed from the offer")


@dataclass(frozen=True)
class SearxngConfig(_Section):
    KEY = "web.searxng"

    url: str | None = option(None, "base URL of a SearXNG instance with the JSON API enabled")


@dataclass(frozen=True)
class KeyedProviderConfig(_Section):
    KEY = "web.<provider>"

    api_key: str | None = option(None, "API key (prefer api_key_env)", secret=True)
    api_key_env: str | None = option(None, "environment variable holding the API key")
    url: str | None = option(None, "endpoint override (default: the provider's public API)")


@dataclass(frozen=True)
class WebConfig(_Section):
    KEY = "web"

    provider: Literal["searxng", "brave", "tavily"] | None = option(
        None, "web_search provider"
    )
    searxng: SearxngConfig = section(SearxngConfig, "SearXNG provider")
    brave: KeyedProviderConfig = section(KeyedProviderConfig, "Brave Search provider")
    tavily: KeyedProviderConfig = section(KeyedProviderConfig, "Tavily provider")
    timeout: float = option(
        20.0, "limit of one fetch, DNS and redirects included, seconds", min=0.1
    )
    max_bytes: int = option(5_000_000, "largest response body read (and decompressed)", min=1024)
    max_redirects: int = option(5, "redirects followed", min=0, max=30)
    char_limit: int = option(50_000, "default web_extract characters per page", min=100)
    allow_private: bool = option(
        False, "allow requests to loopback, private and link-local addresses"
    )
    allowed_hosts: tuple[str, ...] = option(
        (), "hosts reachable even when they resolve to private addresses (a name, "
        "*.suffix, an IP or a CIDR network)"
    )
    user_agent: str = option("execengine/0.1 (+web_extract)", "User-Agent header")


@dataclass(frozen=True)
class FilesConfig(_Section):
    KEY = "files"

    denied_paths: tuple[str, ...] = option(
        (
            "~/.ssh",
            "~/.gnupg",
            "~/.aws",
            "~/.execengine",
            "~/.netrc",
            "~/.docker/config.json",
            "~/.kube",
            "/etc/shadow",
            "/etc/gshadow",
            "/etc/sudoers",
        ),
        "paths the file tools refuse to read or write (the config file is always refused)",
    )
    max_read_chars: int = option(100_000, "largest read_file content returned", min=1000)


@dataclass(frozen=True)
class PolicyConfig(_Section):
    KEY = "policy"

    writable_roots: tuple[str, ...] = option(
        (), "folders script tool calls may write besides the working directory"
    )
    readable_roots: tuple[str, ...] = option(
        ("/usr", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib32", "/lib64"),
        "folders script tool calls may read besides the writable roots (world-readable "
        "files only; files.denied_paths, the config file and credentials never)",
    )
    protected_paths: tuple[str, ...] = option(
        (), "files or folders inside the writable roots that scripts may not change: the "
        "tools refuse to write them, and at isolated they are read-only binds (not "
        "renamed or replaced either)",
    )
    network: Literal["off", "allowlist", "on"] | None = option(
        None, "network of scripts' own sockets; allowlist binds their web_* calls too "
        "(under off those still fetch through the host's guarded fetcher, as the agent's "
        "do) (default: on when code_execution.network, else off)",
    )
    allowed_domains: tuple[str, ...] = option(
        (), "network: allowlist: domains reachable (example.com, *.example.com, an IP)"
    )
    denied_domains: tuple[str, ...] = option(
        (), "domains never reachable (wins over allowed_domains)"
    )
    tools_leave_roots: bool = option(
        False, "let tool calls from scripts read and write outside the roots (unconfined)"
    )
    confine_at_none: bool = option(
        False, "confine script tool calls at isolation level none too (the script itself "
        "is not confined there)"
    )
    allow_home_workdir: bool = option(
        False, "let a user's home folder (or a folder holding a home, or shell start-up "
        "files, .ssh, .gitconfig...) be a sandbox's working directory: a script acting "
        "there as its owner could change what the owner's next login or git command runs"
    )
    agent_calls: Literal["unconfined", "confined"] = option(
        "unconfined", "the agent's own file tool calls: unconfined (path deny-list only) or "
        "confined to the roots of its working directory",
    )


@dataclass(frozen=True)
class SshConfig(_Section):
    KEY = "ssh"

    host: str | None = option(None, "remote host for terminal.backend: ssh")
    port: int = option(22, "SSH port", min=1, max=65535)
    user: str | None = option(None, "remote user (default: ssh's default)")
    identity_file: str | None = option(None, "private key file (key authentication only)")
    known_hosts_file: str | None = option(
        None, "known-hosts file the remote's host key must be in (never auto-accepted; "
        "default ~/.ssh/known_hosts)")
    connect_timeout: float = option(10.0, "seconds to establish the connection", min=1.0)
    remote_dir: str = option(
        "~/.execengine-remote", "remote folder for the runtime, staging and sockets (keep it "
        "short: Unix socket paths are limited to 107 bytes)")
    python: str = option("python3", "remote interpreter (>= 3.8; >= 3.10 for the file tools)")
    cwd: str | None = option(None, "remote working directory of new tasks and of scripts in "
                             "project mode (default: the remote user's home)")


@dataclass(frozen=True)
class PluginsConfig(_Section):
    KEY = "plugins"

    directory: str | None = option(None, "folder of plugin modules (*.py or packages)")
    entry_points: bool = option(True, "load plugins from the execengine.plugins entry points")
    disabled: tuple[str, ...] = option((), "plugin names not to load")


@dataclass(frozen=True)
class AgentConfig(_Section):
    KEY = "agent"

    base_url: str | None = option(None, "OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)")
    model: str | None = option(None, "model name (default: $EXECENGINE_MODEL)")
    api_key_env: str = option("OPENAI_API_KEY", "environment variable holding the API key")
    max_iterations: int = option(20, "model calls per conversation", min=1)
    max_delegate_calls: int = option(3, "delegate_task calls executed per turn", min=0)
    max_parallel_tools: int = option(8, "tool calls of one turn run at once", min=1)
    batch_timeout: float = option(600.0, "limit for one parallel batch, seconds", min=1.0)
    request_timeout: float = option(120.0, "HTTP timeout of one model call, seconds", min=1.0)
    memory_file: str = option("~/.execengine/memory.json", "reference memory tool's file")
    empty_retries: int = option(2, "model calls repeated after an empty answer", min=0, max=10)


@dataclass(frozen=True)
class McpToolFilter(_Section):
    KEY = "mcp_servers.<name>.tools"

    include: tuple[str, ...] | None = option(
        None, "only these tools of the server are registered (default: all)")
    exclude: tuple[str, ...] = option((), "tools of the server not registered")


@dataclass(frozen=True)
class McpServerConfig(_Section):
    """One MCP server (see docs/mcp.md); ``${VAR}`` in command, args, env, cwd, url and
    headers is taken from the host environment when the server starts."""

    KEY = "mcp_servers.<name>"

    command: str | None = option(None, "stdio: the program that runs the server")
    args: tuple[str, ...] = option((), "stdio: its arguments")
    env: Mapping[str, str] = string_map(
        "stdio: environment variables added to the server's (minimal) environment",
        secret=True)
    cwd: str | None = option(None, "stdio: working directory of the server")
    url: str | None = option(None, "streamable HTTP: the server's endpoint")
    headers: Mapping[str, str] = string_map("streamable HTTP: headers sent with every "
                                            "request", secret=True)
    timeout: float = option(120.0, "limit of one tool call, seconds", min=0.1)
    connect_timeout: float = option(
        60.0, "limit of starting the server and its handshake, seconds", min=0.1)
    enabled: bool = option(True, "false: keep the entry but do not start or register it")
    startup: Literal["lazy", "eager"] = option(
        "lazy", "lazy: start on the first call when its tool list is cached (mcp.cache_dir), "
        "else at once; eager: when the registry is built")
    tools: McpToolFilter = section(McpToolFilter, "which of the server's tools are registered")

    def __post_init__(self) -> None:
        super().__post_init__()
        problem = self.problem()
        if problem:
            raise ConfigError(problem, key=self.KEY)

    def problem(self) -> str | None:
        """What is wrong across options (the loader reports it at the server's line)."""
        for value in (self.command, self.cwd, self.url, *self.args,
                      *self.env.values(), *self.headers.values()):
            bad = bad_placeholder(value or "")
            if bad:
                return f"${{...}} must hold an environment variable name, got {bad!r}"
        if bool(self.command) == bool(self.url):
            return "give either command (a stdio server) or url (a streamable HTTP server)"
        if self.url and (self.args or self.env or self.cwd):
            return "args, env and cwd belong to stdio servers (command), not to url"
        if self.command and self.headers:
            return "headers belong to HTTP servers (url), not to command"
        if self.url and not self.url.startswith(("http://", "https://", "${")):
            return f"url must start with http:// or https://, got {self.url!r}"
        return None


@dataclass(frozen=True)
class McpConfig(_Section):
    KEY = "mcp"

    tool_search_threshold: int = option(
        40, "above this many MCP tools, the model sees servers only (not each tool) and "
        "scripts discover tools with search_tools() / describe_tool()", min=0)
    restart_backoff: float = option(
        1.0, "first delay before restarting a crashed server, seconds (doubles each time, "
        "up to 30 s)", min=0.0, max=60.0)
    cache_dir: str | None = option(
        "~/.execengine/mcp-cache", "where each server's last tool list is kept, so a lazy "
        "server starts only on its first call (null: no cache, lazy servers start at once)")
    serve_tools: bool = option(
        False, "`execengine mcp` also exposes the registry's tools themselves, beside "
        "execute_code")


@dataclass(frozen=True)
class Config(_Section):
    """The whole configuration. Build with :func:`load_config` or ``Config()``; every
    value is validated when built (:class:`~execengine.errors.ConfigError`)."""

    code_execution: CodeExecutionConfig = section(CodeExecutionConfig, "the execute_code engine")
    terminal: TerminalConfig = section(TerminalConfig, "the terminal tool")
    approvals: ApprovalsConfig = section(ApprovalsConfig, "dangerous-command approval")
    toolsets: ToolsetsConfig = section(ToolsetsConfig, "which toolsets are offered")
    web: WebConfig = section(WebConfig, "web tools")
    files: FilesConfig = section(FilesConfig, "file tools")
    policy: PolicyConfig = section(PolicyConfig, "what scripts and their tool calls reach")
    ssh: SshConfig = section(SshConfig, "the remote for terminal.backend: ssh")
    plugins: PluginsConfig = section(PluginsConfig, "plugin loading")
    agent: AgentConfig = section(AgentConfig, "the reference agent loop")
    mcp: McpConfig = section(McpConfig, "MCP client and server behaviour")
    mcp_servers: Mapping[str, McpServerConfig] = named_sections(
        McpServerConfig, "MCP servers whose tools are registered (see docs/mcp.md)")
    #: the file this came from, ``None`` for defaults
    source: str | None = field(default=None, compare=False, metadata={"internal": True})
    #: dotted key -> where the value came from ("default", "path:line", "override")
    origins: Mapping[str, str] = field(
        default_factory=dict, compare=False, repr=False, metadata={"internal": True}
    )

    def get(self, dotted: str) -> Any:
        """Value of a dotted key path, e.g. ``config.get("code_execution.timeout")``."""
        value: Any = self
        for part in dotted.split("."):
            value = value[part] if isinstance(value, Mapping) else getattr(value, part)
        return value

    def with_overrides(self, overrides: Mapping[str, Any], *, origin: str = "override") -> Config:
        """A copy with dotted keys replaced, validated like the file (``ConfigError``)."""
        return _configload.apply_overrides(self, overrides, origin=origin)

    def config_path(self) -> Path | None:
        return Path(self.source) if self.source else None


def iter_options(
    cls: type = Config, prefix: str = "", *, names: Mapping[str, Any] | None = None
) -> list[tuple[str, dataclasses.Field[Any]]]:
    """All leaf options as ``(dotted key, field)``, in declaration order.

    Entries of named sections appear once per name in ``names`` (a config's
    ``mcp_servers``), or once as ``<name>`` when ``names`` is None."""
    out: list[tuple[str, dataclasses.Field[Any]]] = []
    for f in dataclasses.fields(cls):
        if f.metadata.get("internal"):
            continue
        key = f"{prefix}{f.name}"
        if f.metadata.get("section"):
            out.extend(iter_options(f.default_factory, key + "."))  # type: ignore[arg-type]
        elif f.metadata.get("named"):
            for name in (["<name>"] if names is None else list(names)):
                out.extend(iter_options(f.metadata["named"], f"{key}.{name}."))
        else:
            out.append((key, f))
    return out


def option_choices(cls: type, name: str) -> tuple[Any, ...] | None:
    """The allowed values of an option declared with a ``Literal`` type, else None."""
    return choices_of(field_types(cls)[name])


def load_config(path: str | Path | None = None) -> Config:
    """Find, read and validate ``config.yaml`` (see the module docstring for the order)."""
    return _configload.load(path, Config)


def parse_config(text: str, *, source: str = "<string>") -> Config:
    """Validate YAML text into a :class:`Config` (``ConfigError`` on any problem)."""
    return _configload.parse(text, Config, source=source)

