"""The benchmarks by name: each loader, the suites and the procedural suite behind one
`load_benchmark`. Above the layer's root (the records and each benchmark's reader) and the two
suite wings it names, so that nothing below it imports it back."""
