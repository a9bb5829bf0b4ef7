// Wrapper module: builds LeaderWorkerSet's controller manager, which testbed.lws runs on the testbed.
module kilocard.local/lwsbins

go 1.26.0
