// Wrapper module: builds etcd's server (its own go.mod carries replace directives, so
// `go install` refuses it).
module kilocard.local/etcdbins

go 1.26.0
