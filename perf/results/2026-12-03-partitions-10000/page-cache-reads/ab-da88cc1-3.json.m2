# HELP ringlog_build_info The broker's version and node id (always 1).
# TYPE ringlog_build_info gauge
ringlog_build_info{version="0.1.0",node_id="0"} 1
# HELP ringlog_shard_up 1 if the shard answered this scrape in time, 0 if not (its figures are missing).
# TYPE ringlog_shard_up gauge
ringlog_shard_up{shard="0"} 1
ringlog_shard_up{shard="1"} 1
# HELP process_cpu_seconds_total User and system CPU time of the broker process.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 130.38
# HELP process_resident_memory_bytes Resident memory of the broker process.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1770663936
# HELP process_open_fds Open file descriptors of the broker process.
# TYPE process_open_fds gauge
process_open_fds 14163
# HELP process_start_time_seconds When the broker process started, in seconds since the Unix epoch.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1796305913.35
# HELP ringlog_requests_total Requests served, per API (Kafka's RequestsPerSec).
# TYPE ringlog_requests_total counter
ringlog_requests_total{shard="0",request="Produce"} 28041
ringlog_requests_total{shard="0",request="Fetch"} 2323
ringlog_requests_total{shard="0",request="Metadata"} 1
ringlog_requests_total{shard="0",request="CreateTopics"} 10
ringlog_requests_total{shard="1",request="Produce"} 28181
ringlog_requests_total{shard="1",request="Fetch"} 2327
# HELP ringlog_request_latency_seconds Time from a request read to its response written, per API (Kafka's TotalTimeMs); quantiles over the last 60 to 120 seconds, NaN when no request came in that time.
# TYPE ringlog_request_latency_seconds summary
ringlog_request_latency_seconds{shard="0",request="Produce",quantile="0.5"} 0.044799
ringlog_request_latency_seconds{shard="0",request="Produce",quantile="0.9"} 0.176127
ringlog_request_latency_seconds{shard="0",request="Produce",quantile="0.99"} 0.473087
ringlog_request_latency_seconds{shard="0",request="Produce",quantile="0.999"} 2.113535
ringlog_request_latency_seconds{shard="0",request="Produce",quantile="1"} 15.007743
ringlog_request_latency_seconds_sum{shard="0",request="Produce"} 2232.427795
ringlog_request_latency_seconds_count{shard="0",request="Produce"} 28041
ringlog_request_latency_seconds{shard="0",request="Fetch",quantile="0.5"} 0.010815
ringlog_request_latency_seconds{shard="0",request="Fetch",quantile="0.9"} 0.024703
ringlog_request_latency_seconds{shard="0",request="Fetch",quantile="0.99"} 0.151551
ringlog_request_latency_seconds{shard="0",request="Fetch",quantile="0.999"} 33.816575
ringlog_request_latency_seconds{shard="0",request="Fetch",quantile="1"} 34.078719
ringlog_request_latency_seconds_sum{shard="0",request="Fetch"} 352.317591
ringlog_request_latency_seconds_count{shard="0",request="Fetch"} 2323
ringlog_request_latency_seconds{shard="0",request="Metadata",quantile="0.5"} 0.005375
ringlog_request_latency_seconds{shard="0",request="Metadata",quantile="0.9"} 0.005375
ringlog_request_latency_seconds{shard="0",request="Metadata",quantile="0.99"} 0.005375
ringlog_request_latency_seconds{shard="0",request="Metadata",quantile="0.999"} 0.005375
ringlog_request_latency_seconds{shard="0",request="Metadata",quantile="1"} 0.005375
ringlog_request_latency_seconds_sum{shard="0",request="Metadata"} 0.005373
ringlog_request_latency_seconds_count{shard="0",request="Metadata"} 1
ringlog_request_latency_seconds{shard="0",request="CreateTopics",quantile="0.5"} 0.897023
ringlog_request_latency_seconds{shard="0",request="CreateTopics",quantile="0.9"} 0.937983
ringlog_request_latency_seconds{shard="0",request="CreateTopics",quantile="0.99"} 1.122303
ringlog_request_latency_seconds{shard="0",request="CreateTopics",quantile="0.999"} 1.122303
ringlog_request_latency_seconds{shard="0",request="CreateTopics",quantile="1"} 1.122303
ringlog_request_latency_seconds_sum{shard="0",request="CreateTopics"} 9.038965
ringlog_request_latency_seconds_count{shard="0",request="CreateTopics"} 10
ringlog_request_latency_seconds{shard="1",request="Produce",quantile="0.5"} 0.040703
ringlog_request_latency_seconds{shard="1",request="Produce",quantile="0.9"} 0.140287
ringlog_request_latency_seconds{shard="1",request="Produce",quantile="0.99"} 0.313343
ringlog_request_latency_seconds{shard="1",request="Produce",quantile="0.999"} 3.506175
ringlog_request_latency_seconds{shard="1",request="Produce",quantile="1"} 3.620863
ringlog_request_latency_seconds_sum{shard="1",request="Produce"} 1861.858467
ringlog_request_latency_seconds_count{shard="1",request="Produce"} 28181
ringlog_request_latency_seconds{shard="1",request="Fetch",quantile="0.5"} 0.000249
ringlog_request_latency_seconds{shard="1",request="Fetch",quantile="0.9"} 0.100351
ringlog_request_latency_seconds{shard="1",request="Fetch",quantile="0.99"} 0.238591
ringlog_request_latency_seconds{shard="1",request="Fetch",quantile="0.999"} 30.277631
ringlog_request_latency_seconds{shard="1",request="Fetch",quantile="1"} 31.850495
ringlog_request_latency_seconds_sum{shard="1",request="Fetch"} 383.471228
ringlog_request_latency_seconds_count{shard="1",request="Fetch"} 2327
# HELP ringlog_request_budget_bytes queued.max.request.bytes: memory all connections may hold in request frames (absent when unbounded).
# TYPE ringlog_request_budget_bytes gauge
ringlog_request_budget_bytes 536870912
# HELP ringlog_request_budget_available_bytes Request budget not held by any request.
# TYPE ringlog_request_budget_available_bytes gauge
ringlog_request_budget_available_bytes 520113872
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
ringlog_network_received_bytes_total{shard="0"} 2769394912
ringlog_network_received_bytes_total{shard="1"} 2770279956
# HELP ringlog_network_sent_bytes_total Response bytes written to clients (size prefixes and record bytes included).
# TYPE ringlog_network_sent_bytes_total counter
ringlog_network_sent_bytes_total{shard="0"} 541756981
ringlog_network_sent_bytes_total{shard="1"} 629730522
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
ringlog_io_uring_file_writes_total{shard="0"} 3792
ringlog_io_uring_file_writes_total{shard="1"} 3467
# HELP ringlog_page_cache_file_writes_total Segment file writes the shard made through the page cache (quiet partitions' appends).
# TYPE ringlog_page_cache_file_writes_total counter
ringlog_page_cache_file_writes_total{shard="0"} 1821882
ringlog_page_cache_file_writes_total{shard="1"} 1862609
# HELP ringlog_page_cache_file_written_bytes_total Bytes of the shard's segment file writes through the page cache.
# TYPE ringlog_page_cache_file_written_bytes_total counter
ringlog_page_cache_file_written_bytes_total{shard="0"} 10193809408
ringlog_page_cache_file_written_bytes_total{shard="1"} 10367713280
# HELP ringlog_io_uring_file_written_bytes_total Bytes written by the shard's io_uring file writes.
# TYPE ringlog_io_uring_file_written_bytes_total counter
ringlog_io_uring_file_written_bytes_total{shard="0"} 3976200192
ringlog_io_uring_file_written_bytes_total{shard="1"} 3635412992
# HELP ringlog_shard_busy_seconds_total Time the shard's executor spent running tasks and polling I/O.
# TYPE ringlog_shard_busy_seconds_total counter
ringlog_shard_busy_seconds_total{shard="0"} 93.356762409
ringlog_shard_busy_seconds_total{shard="1"} 93.817731395
# HELP ringlog_shard_tasks_executed_total Tasks the shard's executor ran.
# TYPE ringlog_shard_tasks_executed_total counter
ringlog_shard_tasks_executed_total{shard="0"} 2022136
ringlog_shard_tasks_executed_total{shard="1"} 2008920
# HELP ringlog_read_cache_budget_bytes The shard's share of log.read.cache.bytes.
# TYPE ringlog_read_cache_budget_bytes gauge
ringlog_read_cache_budget_bytes{shard="0"} 268435456
ringlog_read_cache_budget_bytes{shard="1"} 268435456
# HELP ringlog_read_cache_bytes Segment file chunks the shard's read cache holds.
# TYPE ringlog_read_cache_bytes gauge
ringlog_read_cache_bytes{shard="0"} 267976704
ringlog_read_cache_bytes{shard="1"} 268275712
# HELP ringlog_read_cache_hits_total Reads of segment files served from the read cache.
# TYPE ringlog_read_cache_hits_total counter
ringlog_read_cache_hits_total{shard="0"} 14732
ringlog_read_cache_hits_total{shard="1"} 10997
# HELP ringlog_read_cache_misses_total Reads of segment files that went to the device.
# TYPE ringlog_read_cache_misses_total counter
ringlog_read_cache_misses_total{shard="0"} 11082
ringlog_read_cache_misses_total{shard="1"} 8923
# HELP ringlog_read_cache_evictions_total Chunks evicted from the read cache.
# TYPE ringlog_read_cache_evictions_total counter
ringlog_read_cache_evictions_total{shard="0"} 10376
ringlog_read_cache_evictions_total{shard="1"} 7578
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
