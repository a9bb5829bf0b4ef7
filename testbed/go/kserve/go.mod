// Wrapper module: builds KServe's controller manager, which testbed.kserve runs on the testbed.
module kilocard.local/kservebins

go 1.26.0
