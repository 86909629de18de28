"""What a running question lets others see: cache-hit events, progress read from the audit,
and OpenTelemetry spans. See ``README.md``."""
