"""Ad-monetization example: impressions ⋈ clicks, from a seeded event generator to the join app."""
