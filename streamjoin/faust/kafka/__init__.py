"""The seam to faust's and aiokafka's internals (faust-streaming 0.15.3, aiokafka 0.14.0).

Modules here are the ones that read or wrap private attributes of faust or
aiokafka; each names the attributes it depends on in its docstring.

* :mod:`~streamjoin.faust.kafka.session`: the group session lease (aiokafka's
  ``GroupCoordinator._send_req``) and each partition's latest fetch time.
"""
