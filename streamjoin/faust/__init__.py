"""The faust adapters: the only package that imports faust, aiokafka and rocksdict.

Its top is what a faust app meets:

* :mod:`~streamjoin.faust.app`: ``streamjoin.App`` (``app.join``; our assignor, table manager);
* :mod:`~streamjoin.faust.web`: the worker's web pages;
* :mod:`~streamjoin.faust.runner`: running an app in a faust ``Worker``;
* :mod:`~streamjoin.faust.security`: Kafka security settings as faust credentials.

Below it, one room per concern, each mirroring the pure layer it adapts;
imports point down only (top, then ``join``, then ``assignment`` and
``restore``, then ``kafka``):

* :mod:`~streamjoin.faust.join`: joins in a worker (``streamjoin.join``);
* :mod:`~streamjoin.faust.assignment`: ``streamjoin:PartitionAssignor`` (``streamjoin.assignment``);
* :mod:`~streamjoin.faust.restore`: ``streamjoin:TableManager`` and restoration
  (``streamjoin.restore``);
* :mod:`~streamjoin.faust.kafka`: the seam, the only modules that touch private
  attributes of faust or aiokafka.

Importing this package imports none of them (nor faust).
"""
