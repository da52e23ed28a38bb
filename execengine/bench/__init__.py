"""The benchmark harness: what programmatic tool calling saves, measured for real.

- :mod:`~execengine.bench.tokens`: exact offline token counts (o200k_base, cl100k_base).
- :mod:`~execengine.bench.fixtures`: the generated source tree, config files and local web.
- :mod:`~execengine.bench.workflow`: what a workflow is; :mod:`~execengine.bench.suite` the
  built-in ones; :mod:`~execengine.bench.userflows` loading users' own (Python or YAML).
- :mod:`~execengine.bench.runner`: running a workflow both ways (batched and serial
  sequential calls, one execute_code call), checking answers and calls, measuring.
- :mod:`~execengine.bench.cost`: billing as price sheets do (``prices.yaml``, dated).
- :mod:`~execengine.bench.report`: tables, JSON, the README block and the chart.
- :mod:`~execengine.bench.live`: the same tasks with a live model (``--model URL/NAME``).

Needs the ``bench`` extra (``pip install 'execengine[bench]'``).
"""
