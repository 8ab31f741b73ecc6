"""``streamjoin demo``: the ad pipeline end to end (see :mod:`streamjoin.ads.demo.run`)."""
