"""``streamjoin demo``: the ad-monetization pipeline end to end (see :mod:`streamjoin.demo.run`)."""
