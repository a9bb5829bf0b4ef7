// Wrapper module: builds kwok (kept apart from k8s so MVS cannot unify their dependencies).
module kilocard.local/kwokbins

go 1.26.0
