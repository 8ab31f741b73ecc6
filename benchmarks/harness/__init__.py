"""What the benchmarks share; each benchmark module keeps only what it measures.

* :mod:`.report`: progress lines, aligned plain-text tables, verdicts, number formats;
* :mod:`.measure`: percentiles, polled counts and the rate between two polls,
  directory sizes, the peak resident set size of a call;
* :mod:`.workers`: the run's working directory, the embedded broker and worker
  processes (alone or as a group with web ports), each stopped however the run ends,
  and polling a worker's count until it has seen every record;
* :mod:`.kafka`: topics, a changelog written before any worker starts, and the
  generator's backlog produced as fast as the broker takes it;
* :mod:`.counter`: a count served over HTTP on loopback, for passes that are not faust apps;
* :mod:`.ads`: the ad-monetization worker the join benchmarks run, and its join's
  figures read over HTTP.
"""
