"""Ranking, the adapter registry and failover under one deadline. See README.md."""
