"""The benchmark harness: what programmatic tool calling saves, measured for real.

- :mod:`~execengine.bench.tokens`: exact offline token counts (o200k_base, cl100k_base).
- :mod:`~execengine.bench.fixtures`: the generated source tree, config files and local web.
- :mod:`~execengine.bench.workflow`: what a workflow is (strategies: a plan and the script
  making its calls); :mod:`~execengine.bench.suite` the built-in ones;
  :mod:`~execengine.bench.userflows` loading users' own (Python or YAML).
- :mod:`~execengine.bench.runner`: running each strategy every way (batched and serial
  sequential calls, one execute_code call), checking answers and calls, measuring;
  :mod:`~execengine.bench.reproducible`: what keeps two runs' counts identical.
- :mod:`~execengine.bench.cost`: billing as price sheets do (``prices.yaml``, dated, with the
  tokenizer, the tool-use system prompt and the reasoning tokens of each model).
- :mod:`~execengine.bench.compare`: which figures face each other (the cheapest plan against
  the cheapest script), tasks, medians, intervals; :mod:`~execengine.bench.report` the
  summary, the table and the docs' blocks; :mod:`~execengine.bench.chart` the chart.
- :mod:`~execengine.bench.live`: the same tasks with a live model (``--model URL/NAME``),
  beside the oracle.

The built-in figures are an oracle upper bound: hand-written plans and scripts, no model.

Needs the ``bench`` extra (``pip install 'execengine[bench]'``).
"""
