"""Topics: names, policies, producers, subscriptions, readers, the read-compacted view."""
