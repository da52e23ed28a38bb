"""The live benchmark (``execengine bench tokens --model URL/NAME``): a real model does the
tasks; :mod:`.providers` speaks to the endpoint, :mod:`.run` runs, checks and summarises."""
