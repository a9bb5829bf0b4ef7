// Wrapper module: builds kube-apiserver, kube-controller-manager, kube-scheduler and kubectl
// from k8s.io/kubernetes. build.sh copies it to the cache, pins the version and derives the
// staging-module replace list from k8s.io/kubernetes' own go.mod.
module kilocard.local/k8sbins

go 1.26.0
