"""A version that cannot start: it fails before it ever reports a status (a broken deploy)."""

raise SystemExit("broken version: a dependency this build needs is missing")
