"""`naiad tune`: the configuration tuner. It searches a model's instance count, batching, queue
delay, framework threads and naiad's workers for the best throughput under a p99 budget, with
`naiad perf`'s engine (naiad.loadgen) as its measuring arm, and writes the best config.pbtxt per
objective with a Markdown and an HTML report. The command line is naiad.cli.commands.tune; the
whole run is `tuning.run_tune`."""
