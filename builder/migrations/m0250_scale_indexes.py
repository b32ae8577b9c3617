"""Indexes for pools of hundreds of thousands of images (issue 27).

Lookups that ran once per group or per concept scanned a whole table: the items of a dedup
group (``annotation push``, ``annotation pull``'s decisions), a concept's dedup groups
(``image_dedup`` rewrites one concept at a time) and the reviewed groups it leaves alone (read
once per concept). With these indexes each is a search, so the
stages grow as n log n, not as n x groups.
"""

VERSION = 250

SQL = """
CREATE INDEX IF NOT EXISTS items_group ON items(group_id);
CREATE INDEX IF NOT EXISTS dedup_groups_concept ON dedup_groups(concept);
CREATE INDEX IF NOT EXISTS dedup_groups_status ON dedup_groups(status);
"""
