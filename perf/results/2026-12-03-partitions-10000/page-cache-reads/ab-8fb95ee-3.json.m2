# HELP ringlog_build_info The broker's version and node id (always 1).
# TYPE ringlog_build_info gauge
ringlog_build_info{version="0.1.0",node_id="0"} 1
# HELP ringlog_shard_up 1 if the shard answered this scrape in time, 0 if not (its figures are missing).
# TYPE ringlog_shard_up gauge
ringlog_shard_up{shard="0"} 1
ringlog_shard_up{shard="1"} 1
# HELP process_cpu_seconds_total User and system CPU time of the broker process.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 126.55
# HELP process_resident_memory_bytes Resident memory of the broker process.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1575571456
# HELP process_open_fds Open file descriptors of the broker process.
# TYPE process_open_fds gauge
process_open_fds 14161
# HELP process_start_time_seconds When the broker process started, in seconds since the Unix epoch.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1796306109.79
# HELP ringlog_requests_total Requests served, per API (Kafka's RequestsPerSec).
# TYPE ringlog_requests_total counter
ringlog_requests_total{shard="0",request="Produce"} 26747
ringlog_requests_total{shard="0",request="Fetch"} 4358
ringlog_requests_total{shard="0",request="Metadata"} 1
ringlog_requests_total{shard="0",request="CreateTopics"} 10
ringlog_requests_total{shard="1",request="Produce"} 26799
ringlog_requests_total{shard="1",request="Fetch"} 4356
# HELP ringlog_request_latency_seconds Time from a request read to its response written, per API (Kafka's TotalTimeMs); quantiles over the last 60 to 120 seconds, NaN when no request came in that time.
# TYPE ringlog_request_latency_seconds summary
ringlog_request_latency_seconds{shard="0",request="Produce",quantile="0.5"} 0.025343
ringlog_request_latency_seconds{shard="0",request="Produce",quantile="0.9"} 0.137215
ringlog_request_latency_seconds{shard="0",request="Produce",quantile="0.99"} 0.475135
ringlog_request_latency_seconds{shard="0",request="Produce",quantile="0.999"} 1.400831
ringlog_request_latency_seconds{shard="0",request="Produce",quantile="1"} 6.389759
ringlog_request_latency_seconds_sum{shard="0",request="Produce"} 1536.501111
ringlog_request_latency_seconds_count{shard="0",request="Produce"} 26747
ringlog_request_latency_seconds{shard="0",request="Fetch",quantile="0.5"} 0.000154
ringlog_request_latency_seconds{shard="0",request="Fetch",quantile="0.9"} 0.100351
ringlog_request_latency_seconds{shard="0",request="Fetch",quantile="0.99"} 0.180223
ringlog_request_latency_seconds{shard="0",request="Fetch",quantile="0.999"} 19.791871
ringlog_request_latency_seconds{shard="0",request="Fetch",quantile="1"} 27.918335
ringlog_request_latency_seconds_sum{shard="0",request="Fetch"} 432.726178
ringlog_request_latency_seconds_count{shard="0",request="Fetch"} 4358
ringlog_request_latency_seconds{shard="0",request="Metadata",quantile="0.5"} 0.010751
ringlog_request_latency_seconds{shard="0",request="Metadata",quantile="0.9"} 0.010751
ringlog_request_latency_seconds{shard="0",request="Metadata",quantile="0.99"} 0.010751
ringlog_request_latency_seconds{shard="0",request="Metadata",quantile="0.999"} 0.010751
ringlog_request_latency_seconds{shard="0",request="Metadata",quantile="1"} 0.010751
ringlog_request_latency_seconds_sum{shard="0",request="Metadata"} 0.010692
ringlog_request_latency_seconds_count{shard="0",request="Metadata"} 1
ringlog_request_latency_seconds{shard="0",request="CreateTopics",quantile="0.5"} 2.211839
ringlog_request_latency_seconds{shard="0",request="CreateTopics",quantile="0.9"} 2.392063
ringlog_request_latency_seconds{shard="0",request="CreateTopics",quantile="0.99"} 2.637823
ringlog_request_latency_seconds{shard="0",request="CreateTopics",quantile="0.999"} 2.637823
ringlog_request_latency_seconds{shard="0",request="CreateTopics",quantile="1"} 2.637823
ringlog_request_latency_seconds_sum{shard="0",request="CreateTopics"} 22.714385
ringlog_request_latency_seconds_count{shard="0",request="CreateTopics"} 10
ringlog_request_latency_seconds{shard="1",request="Produce",quantile="0.5"} 0.024063
ringlog_request_latency_seconds{shard="1",request="Produce",quantile="0.9"} 0.098815
ringlog_request_latency_seconds{shard="1",request="Produce",quantile="0.99"} 0.264191
ringlog_request_latency_seconds{shard="1",request="Produce",quantile="0.999"} 4.423679
ringlog_request_latency_seconds{shard="1",request="Produce",quantile="1"} 23.068671
ringlog_request_latency_seconds_sum{shard="1",request="Produce"} 1422.147118
ringlog_request_latency_seconds_count{shard="1",request="Produce"} 26799
ringlog_request_latency_seconds{shard="1",request="Fetch",quantile="0.5"} 0.020095
ringlog_request_latency_seconds{shard="1",request="Fetch",quantile="0.9"} 0.100351
ringlog_request_latency_seconds{shard="1",request="Fetch",quantile="0.99"} 0.140287
ringlog_request_latency_seconds{shard="1",request="Fetch",quantile="0.999"} 18.612223
ringlog_request_latency_seconds{shard="1",request="Fetch",quantile="1"} 28.704767
ringlog_request_latency_seconds_sum{shard="1",request="Fetch"} 347.561831
ringlog_request_latency_seconds_count{shard="1",request="Fetch"} 4356
# HELP ringlog_request_budget_bytes queued.max.request.bytes: memory all connections may hold in request frames (absent when unbounded).
# TYPE ringlog_request_budget_bytes gauge
ringlog_request_budget_bytes 536870912
# HELP ringlog_request_budget_available_bytes Request budget not held by any request.
# TYPE ringlog_request_budget_available_bytes gauge
ringlog_request_budget_available_bytes 527396118
# HELP ringlog_request_budget_waiting_connections Connections waiting for request budget before reading their next request.
# TYPE ringlog_request_budget_waiting_connections gauge
ringlog_request_budget_waiting_connections 0
# HELP ringlog_log_cleanings_total Cleanings of compacted logs by the shard's log cleaner.
# TYPE ringlog_log_cleanings_total counter
ringlog_log_cleanings_total{shard="0"} 0
ringlog_log_cleanings_total{shard="1"} 0
# HELP ringlog_log_cleaner_bytes_before_total Bytes of the segments the cleaner rewrote, before cleaning.
# TYPE ringlog_log_cleaner_bytes_before_total counter
ringlog_log_cleaner_bytes_before_total{shard="0"} 0
ringlog_log_cleaner_bytes_before_total{shard="1"} 0
# HELP ringlog_log_cleaner_bytes_after_total Bytes of the segments the cleaner wrote in their place.
# TYPE ringlog_log_cleaner_bytes_after_total counter
ringlog_log_cleaner_bytes_after_total{shard="0"} 0
ringlog_log_cleaner_bytes_after_total{shard="1"} 0
# HELP ringlog_network_received_bytes_total Request bytes read from clients (size prefixes included).
# TYPE ringlog_network_received_bytes_total counter
ringlog_network_received_bytes_total{shard="0"} 2373261416
ringlog_network_received_bytes_total{shard="1"} 2375550569
# HELP ringlog_network_sent_bytes_total Response bytes written to clients (size prefixes and record bytes included).
# TYPE ringlog_network_sent_bytes_total counter
ringlog_network_sent_bytes_total{shard="0"} 862938562
ringlog_network_sent_bytes_total{shard="1"} 931553649
# HELP ringlog_connections Client connections open.
# TYPE ringlog_connections gauge
ringlog_connections{shard="0"} 20
ringlog_connections{shard="1"} 20
# HELP ringlog_connections_accepted_total Client connections accepted.
# TYPE ringlog_connections_accepted_total counter
ringlog_connections_accepted_total{shard="0"} 32
ringlog_connections_accepted_total{shard="1"} 20
# HELP ringlog_io_uring_file_reads_total File reads the shard submitted to io_uring.
# TYPE ringlog_io_uring_file_reads_total counter
ringlog_io_uring_file_reads_total{shard="0"} 0
ringlog_io_uring_file_reads_total{shard="1"} 0
# HELP ringlog_io_uring_file_read_bytes_total Bytes read by the shard's io_uring file reads.
# TYPE ringlog_io_uring_file_read_bytes_total counter
ringlog_io_uring_file_read_bytes_total{shard="0"} 0
ringlog_io_uring_file_read_bytes_total{shard="1"} 0
# HELP ringlog_io_uring_file_writes_total File writes the shard submitted to io_uring (busy partitions' O_DIRECT appends, zero fill, index and checkpoint files).
# TYPE ringlog_io_uring_file_writes_total counter
ringlog_io_uring_file_writes_total{shard="0"} 5000
ringlog_io_uring_file_writes_total{shard="1"} 5000
# HELP ringlog_page_cache_file_writes_total Segment file writes the shard made through the page cache (quiet partitions' appends).
# TYPE ringlog_page_cache_file_writes_total counter
ringlog_page_cache_file_writes_total{shard="0"} 1270391
ringlog_page_cache_file_writes_total{shard="1"} 1337502
# HELP ringlog_page_cache_file_written_bytes_total Bytes of the shard's segment file writes through the page cache.
# TYPE ringlog_page_cache_file_written_bytes_total counter
ringlog_page_cache_file_written_bytes_total{shard="0"} 7550263296
ringlog_page_cache_file_written_bytes_total{shard="1"} 7829336064
# HELP ringlog_io_uring_file_written_bytes_total Bytes written by the shard's io_uring file writes.
# TYPE ringlog_io_uring_file_written_bytes_total counter
ringlog_io_uring_file_written_bytes_total{shard="0"} 5242880000
ringlog_io_uring_file_written_bytes_total{shard="1"} 5242880000
# HELP ringlog_shard_busy_seconds_total Time the shard's executor spent running tasks and polling I/O.
# TYPE ringlog_shard_busy_seconds_total counter
ringlog_shard_busy_seconds_total{shard="0"} 71.641142978
ringlog_shard_busy_seconds_total{shard="1"} 68.578678637
# HELP ringlog_shard_tasks_executed_total Tasks the shard's executor ran.
# TYPE ringlog_shard_tasks_executed_total counter
ringlog_shard_tasks_executed_total{shard="0"} 1469624
ringlog_shard_tasks_executed_total{shard="1"} 1586225
# HELP ringlog_read_cache_budget_bytes The shard's share of log.read.cache.bytes.
# TYPE ringlog_read_cache_budget_bytes gauge
ringlog_read_cache_budget_bytes{shard="0"} 268435456
ringlog_read_cache_budget_bytes{shard="1"} 268435456
# HELP ringlog_read_cache_bytes Segment file chunks the shard's read cache holds.
# TYPE ringlog_read_cache_bytes gauge
ringlog_read_cache_bytes{shard="0"} 268177408
ringlog_read_cache_bytes{shard="1"} 268259328
# HELP ringlog_read_cache_hits_total Reads of segment files served from the read cache.
# TYPE ringlog_read_cache_hits_total counter
ringlog_read_cache_hits_total{shard="0"} 18112
ringlog_read_cache_hits_total{shard="1"} 17145
# HELP ringlog_read_cache_misses_total Reads of segment files that went to the device.
# TYPE ringlog_read_cache_misses_total counter
ringlog_read_cache_misses_total{shard="0"} 17342
ringlog_read_cache_misses_total{shard="1"} 15345
# HELP ringlog_read_cache_evictions_total Chunks evicted from the read cache.
# TYPE ringlog_read_cache_evictions_total counter
ringlog_read_cache_evictions_total{shard="0"} 15860
ringlog_read_cache_evictions_total{shard="1"} 13497
# HELP ringlog_tail_bytes Memory the in-memory tails of the shard's active segments hold.
# TYPE ringlog_tail_bytes gauge
ringlog_tail_bytes{shard="0"} 163840000
ringlog_tail_bytes{shard="1"} 163840000
# HELP ringlog_partition_leader 1 if this node's replica leads the partition, 0 if it follows.
# TYPE ringlog_partition_leader gauge
# HELP ringlog_partition_log_start_offset The replica's log start offset (Kafka's LogStartOffset).
# TYPE ringlog_partition_log_start_offset gauge
# HELP ringlog_partition_log_end_offset The replica's log end offset (Kafka's LogEndOffset).
# TYPE ringlog_partition_log_end_offset gauge
# HELP ringlog_partition_high_watermark The replica's high watermark: consumers read below it.
# TYPE ringlog_partition_high_watermark gauge
# HELP ringlog_partition_size_bytes Bytes in the replica's log segments (Kafka's Size).
# TYPE ringlog_partition_size_bytes gauge
# HELP ringlog_partition_replicas Replicas of the partition (reported by its leader).
# TYPE ringlog_partition_replicas gauge
# HELP ringlog_partition_in_sync_replicas In-sync replicas of the partition, the leader included (reported by its leader).
# TYPE ringlog_partition_in_sync_replicas gauge
# HELP ringlog_leader_partitions Partitions the shard leads (Kafka's LeaderCount).
# TYPE ringlog_leader_partitions gauge
ringlog_leader_partitions{shard="0"} 5000
ringlog_leader_partitions{shard="1"} 5000
# HELP ringlog_under_replicated_partitions Partitions the shard leads with fewer in-sync replicas than replicas (Kafka's UnderReplicatedPartitions).
# TYPE ringlog_under_replicated_partitions gauge
ringlog_under_replicated_partitions{shard="0"} 0
ringlog_under_replicated_partitions{shard="1"} 0
# HELP ringlog_offline_log_partitions Replicas whose log failed (an I/O error) and serve nothing until reopened.
# TYPE ringlog_offline_log_partitions gauge
ringlog_offline_log_partitions{shard="0"} 0
ringlog_offline_log_partitions{shard="1"} 0
