"""Tools for the people who work on Quire, outside the wheel: the local cluster that tests and
benchmarks start (`devtools.cluster`), its processes (`devtools.procs`) and PostgreSQL schemas
(`devtools.postgres`). The product never imports this package."""
