// Wrapper module: builds prom-label-proxy, the tenant gate the tests put in front of Prometheus.
module kilocard.local/promlabelproxybins

go 1.26.0
