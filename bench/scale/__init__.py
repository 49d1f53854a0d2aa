"""`make bench-scale`: many topics on one broker and over three, and a failover of a third of them."""
