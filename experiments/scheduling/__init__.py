"""Who gets a queue's next free slot: fair share across teams, quotas and study priorities
(docs/design/fair-share.md). Pure functions: the claim path reads the rows and asks them."""
