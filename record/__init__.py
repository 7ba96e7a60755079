"""What a run produced, and nothing that runs it: spans (``recorder``), metrics (``metrics``: GPU
busy as a union of intervals, idle gaps, the formula's terms), run records (``schema``,
``run_record``), traces (``chrome_trace``), and the views a chart needs of a run. ``imported/``:
other engines' traces, apart. The bottom layer: standard library only."""
