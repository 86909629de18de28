"""What a running service is made of besides its stages: the analysis worker pool, the
question gate, size-bounded memos and single-flight, cache-hit events, the private event
loop behind the sync API, resource closing, clocks, the in-process evidence store, progress
read from the audit, and OpenTelemetry spans. Nothing here knows the pipeline's models."""
