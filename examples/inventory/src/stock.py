"""A tiny example project: stock levels of a shop."""

LOW_STOCK = 5


def restock_needed(levels):
    # TODO: read the threshold from a config file
    return sorted(item for item, count in levels.items() if count < LOW_STOCK)


def total_items(levels):
    return sum(levels.values())  # TODO: ignore discontinued items
