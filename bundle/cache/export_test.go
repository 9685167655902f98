package cache

// flushForBench exposes the durable flush to the benchmarks of package
// cache_test.
var FlushForBench = flushTree
