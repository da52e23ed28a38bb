"""Formats a stock report."""

from stock import restock_needed, total_items


def report(levels):
    lines = [f"{total_items(levels)} items in stock"]
    for item in restock_needed(levels):
        lines.append(f"restock: {item}")
    # FIXME: sort by urgency, not by name
    return "\n".join(lines)
