"""The schema a new SQLite store gets: written by scripts/regenerate_sqlite_head.py, not by hand."""

REVISION = "0009"

#: What SQLite kept of the tables, indexes and triggers the migrations create, in creation order.
STATEMENTS = (
    "CREATE TABLE partita_alembic_version (\n\tversion_num VARCHAR(32) NOT NULL, \n\tCONSTRAINT partita_alembic_version_pkc PRIMARY KEY (version_num)\n)",
    'CREATE TABLE partita_runs (\n\trun_id VARCHAR(64) NOT NULL, \n\tstatus VARCHAR(16) NOT NULL, \n\tstarted_at FLOAT NOT NULL, \n\tfinished_at FLOAT, \n\ttargets TEXT NOT NULL, \n\tselection_kind VARCHAR(16) NOT NULL, \n\tdomain TEXT, \n\tkey_count INTEGER, \n\tattempt_count INTEGER, \n\t"plan" TEXT NOT NULL, \n\tsummary TEXT, \n\trecord_partition_keys BOOLEAN NOT NULL, \n\towner_host TEXT NOT NULL, \n\towner_pid INTEGER NOT NULL, \n\towner_token TEXT NOT NULL, \n\theartbeat_at FLOAT NOT NULL, launched_by VARCHAR(16), flow_name TEXT, cancel_requested_at FLOAT, \n\tPRIMARY KEY (run_id)\n)',
    "CREATE INDEX ix_partita_runs_started_at ON partita_runs (started_at)",
    "CREATE INDEX ix_partita_runs_status ON partita_runs (status)",
    "CREATE TABLE partita_attempts (\n\trun_id VARCHAR(64) NOT NULL, \n\tasset TEXT NOT NULL, \n\tidx INTEGER NOT NULL, \n\tstatus VARCHAR(16) NOT NULL, \n\treason VARCHAR(32), \n\tpartition_key_present BOOLEAN NOT NULL, \n\tpartition_key TEXT, \n\tinvocations INTEGER NOT NULL, \n\tstarted_at FLOAT, \n\tfinished_at FLOAT, \n\tduration FLOAT NOT NULL, \n\tfailure_type TEXT, \n\tfailure_message TEXT, \n\tfailure_traceback TEXT, \n\tblocked_by TEXT, \n\tresolution VARCHAR(16), \n\tmaterialization_id TEXT, \n\tPRIMARY KEY (run_id, asset, idx), \n\tFOREIGN KEY(run_id) REFERENCES partita_runs (run_id) ON DELETE CASCADE\n)\n WITHOUT ROWID\n\n",
    "CREATE TABLE partita_invocations (\n\trun_id VARCHAR(64) NOT NULL, \n\tasset TEXT NOT NULL, \n\tidx INTEGER NOT NULL, \n\tnumber INTEGER NOT NULL, \n\tstarted_at FLOAT, \n\tfinished_at FLOAT, \n\tsucceeded BOOLEAN NOT NULL, \n\tfailure_type TEXT, \n\tfailure_message TEXT, \n\tPRIMARY KEY (run_id, asset, idx, number), \n\tFOREIGN KEY(run_id) REFERENCES partita_runs (run_id) ON DELETE CASCADE\n)\n WITHOUT ROWID\n\n",
    "CREATE TABLE partita_events (\n\tid INTEGER NOT NULL, \n\tasset TEXT NOT NULL, \n\tpartition_key TEXT, \n\tpartition_date TEXT, \n\textra TEXT NOT NULL, \n\ttimestamp FLOAT NOT NULL, \n\tsource_kind VARCHAR(16) NOT NULL, \n\tsource_run_id VARCHAR(64), \n\tsource_asset TEXT, \n\tsource_key_present BOOLEAN, \n\tsource_invocation INTEGER, \n\tdedupe_key TEXT, \n\tpayload_hash VARCHAR(64), \n\tPRIMARY KEY (id)\n)",
    "CREATE INDEX ix_partita_events_asset_id ON partita_events (asset, id)",
    "CREATE INDEX ix_partita_events_asset_key ON partita_events (asset, partition_key)",
    "CREATE UNIQUE INDEX uq_partita_events_dedupe_key ON partita_events (dedupe_key) WHERE dedupe_key IS NOT NULL",
    "CREATE INDEX ix_partita_events_run ON partita_events (source_run_id) WHERE dedupe_key IS NOT NULL",
    "CREATE TABLE partita_partitions (\n\tdomain TEXT NOT NULL, \n\tpartition_key TEXT NOT NULL, \n\tfirst_seen FLOAT NOT NULL, \n\tlast_seen FLOAT NOT NULL, \n\tretired BOOLEAN NOT NULL, \n\tretired_at FLOAT, \n\treactivated_at FLOAT, \n\tlast_run_id VARCHAR(64), \n\tPRIMARY KEY (domain, partition_key)\n)",
    "CREATE TABLE partita_partition_history (\n\tid INTEGER NOT NULL, \n\tdomain TEXT NOT NULL, \n\tpartition_key TEXT NOT NULL, \n\taction VARCHAR(16) NOT NULL, \n\tat FLOAT NOT NULL, \n\trun_id VARCHAR(64), \n\tPRIMARY KEY (id)\n)",
    "CREATE INDEX ix_partita_partition_history_key ON partita_partition_history (domain, partition_key, id)",
    "CREATE TABLE partita_trigger_requests (\n\tid INTEGER NOT NULL, \n\tflow TEXT NOT NULL, \n\tpartition_key TEXT NOT NULL, \n\tgeneration INTEGER NOT NULL, \n\tstatus VARCHAR(16) NOT NULL, \n\tevent_ids TEXT NOT NULL, \n\trun_id VARCHAR(64), \n\tcreated_at FLOAT NOT NULL, \n\tclaimed_at FLOAT, \n\tfinished_at FLOAT, tries INTEGER DEFAULT '0' NOT NULL, start_failures INTEGER DEFAULT '0' NOT NULL, not_before FLOAT, last_error TEXT, \n\tPRIMARY KEY (id), \n\tCONSTRAINT uq_partita_trigger_requests UNIQUE (flow, partition_key, generation)\n)",
    "CREATE INDEX ix_partita_trigger_requests_status ON partita_trigger_requests (flow, status)",
    "CREATE TABLE partita_trigger_waiting (\n\tflow TEXT NOT NULL, \n\tpartition_key TEXT NOT NULL, \n\tfirst_seen FLOAT NOT NULL, \n\tevent_ids TEXT NOT NULL, \n\tPRIMARY KEY (flow, partition_key)\n)",
    "CREATE TABLE partita_trigger_cursors (\n\tflow TEXT NOT NULL, \n\tlast_event_id INTEGER NOT NULL, \n\tlast_tick FLOAT, last_event_txid INTEGER DEFAULT '0' NOT NULL, \n\tPRIMARY KEY (flow)\n)",
    "CREATE TABLE partita_flow_state (\n\tflow TEXT NOT NULL, \n\tpaused BOOLEAN NOT NULL, \n\tchanged_at FLOAT NOT NULL, \n\tPRIMARY KEY (flow)\n)",
    "CREATE TABLE partita_daemons (\n\tdaemon_id VARCHAR(64) NOT NULL, \n\thost TEXT NOT NULL, \n\tpid INTEGER NOT NULL, \n\tstarted_at FLOAT NOT NULL, \n\theartbeat_at FLOAT NOT NULL, \n\tstopped_at FLOAT, \n\tPRIMARY KEY (daemon_id)\n)",
    "CREATE TABLE partita_trigger_runs (\n\trun_id VARCHAR(64) NOT NULL, \n\trequest_id INTEGER NOT NULL, \n\tflow TEXT NOT NULL, \n\tattempt INTEGER NOT NULL, \n\tfollows_run_id VARCHAR(64), \n\tcreated_at FLOAT NOT NULL, \n\tPRIMARY KEY (run_id)\n)",
    "CREATE INDEX ix_partita_trigger_runs_request ON partita_trigger_runs (request_id)",
    "CREATE INDEX ix_partita_runs_flow_name ON partita_runs (flow_name, started_at)",
    'CREATE TABLE partita_run_tags (\n\trun_id VARCHAR(64) NOT NULL, \n\t"key" TEXT NOT NULL, \n\tvalue TEXT NOT NULL, \n\tPRIMARY KEY (run_id, "key"), \n\tFOREIGN KEY(run_id) REFERENCES partita_runs (run_id) ON DELETE CASCADE\n)\n WITHOUT ROWID\n\n',
    'CREATE INDEX ix_partita_run_tags_key_value ON partita_run_tags ("key", value)',
    "CREATE INDEX ix_partita_events_outlet_key ON partita_events (asset, partition_key, id, source_run_id, timestamp) WHERE source_kind = 'outlet'",
    "CREATE INDEX ix_partita_attempts_asset_key ON partita_attempts (asset, partition_key, finished_at, status, run_id) WHERE partition_key IS NOT NULL",
    "CREATE TABLE partita_attempt_logs (\n\trun_id VARCHAR(64) NOT NULL, \n\tid INTEGER NOT NULL, \n\tasset TEXT NOT NULL, \n\tidx INTEGER NOT NULL, \n\tinvocation INTEGER, \n\tseq INTEGER NOT NULL, \n\tat FLOAT NOT NULL, \n\tstream VARCHAR(8) NOT NULL, \n\tlevel INTEGER, \n\tlogger TEXT, \n\tmessage TEXT NOT NULL, \n\tPRIMARY KEY (run_id, id)\n)\n WITHOUT ROWID\n\n",
    "CREATE TABLE partita_pool_leases (\n\tpool VARCHAR(200) NOT NULL, \n\tslot INTEGER NOT NULL, \n\tlease_id VARCHAR(64) NOT NULL, \n\trun_id VARCHAR(64) NOT NULL, \n\thost TEXT NOT NULL, \n\tpid INTEGER NOT NULL, \n\towner_token TEXT NOT NULL, \n\tasset TEXT NOT NULL, \n\tkey_index INTEGER NOT NULL, \n\tpartition_key TEXT, \n\tacquired_at FLOAT NOT NULL, \n\texpires_at FLOAT NOT NULL, \n\tPRIMARY KEY (pool, slot), \n\tUNIQUE (lease_id)\n)",
    "CREATE TABLE partita_pool_waiters (\n\tpool VARCHAR(200) NOT NULL, \n\trun_id VARCHAR(64) NOT NULL, \n\thost TEXT NOT NULL, \n\tpid INTEGER NOT NULL, \n\tasset TEXT NOT NULL, \n\twaiting INTEGER NOT NULL, \n\tsince FLOAT NOT NULL, \n\texpires_at FLOAT NOT NULL, \n\tPRIMARY KEY (pool, run_id)\n)",
)
