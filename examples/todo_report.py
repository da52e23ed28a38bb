"""Find every TODO/FIXME in the example project and show each with its surrounding lines.

Run from the repository root:

    execengine run --cwd examples/inventory examples/todo_report.py

The script runs in a sandboxed child; search_files and read_file are served by the host.
"""
from concurrent.futures import ThreadPoolExecutor

from hermes_tools import read_file, search_files

found = search_files(r"\b(TODO|FIXME)\b", path=".", file_glob="*.py")
matches = found.get("matches", [])
print(f"{found.get('total_count', len(matches))} notes in the project\n")


def excerpt(match):
    start = max(1, match["line"] - 1)
    text = read_file(match["path"], offset=start, limit=3)
    return match, text.get("content", text.get("error", ""))


with ThreadPoolExecutor(8) as pool:  # the reads run concurrently on the host
    for match, content in pool.map(excerpt, matches):
        print(f"{match['path']}:{match['line']}")
        print(content)
        print()
