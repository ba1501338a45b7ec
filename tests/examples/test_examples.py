"""Every example under examples/ runs, and every command the docs show works.

Examples run as ``python examples/NAME.py`` in a subprocess with this
interpreter, from a temporary working directory. CLI commands from README.md
and docs/*.md run verbatim from a temporary directory that links
``examples/`` in, so relative paths and the ``pkg.module:name`` form resolve
as they do from the repository root without writing into the checkout.

``partita runs ...`` commands read run history, so the temporary directory
first gets the two runs docs/results-and-history.md records (`HISTORY_RUNS`),
and the placeholders ``RUN_ID`` (the first, failed run), ``RUN_A`` (the first)
and ``RUN_B`` (the second) are replaced by their ids. ``partita events ...``
commands read the event log, so their directory first gets the runs and the
publication docs/events.md shows (`EVENT_HISTORY`). Commands that read the
registry of the runtime domain ``tenants`` or its discovery events
(``partitions --domain``, ``partitions retire``, ``events list --asset
tenants``) first get one discovering run (`TENANT_HISTORY`); the tenant table
of examples/tenant_fanout.py lives in ``$TENANT_DATA`` under the temporary
directory. Every ``--json`` document is validated against its schema in
docs/schemas.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# Lines each example must print (substrings, checked in order of appearance).
EXPECTED_OUTPUT: dict[str, list[str]] = {
    "quickstart.py": [],  # defines the flow only; the CLI tests below run it
    "readme_example.py": [
        '"schema": "partita.plan"',
        "RunStatus.SUCCESS ()",
        "2026-08-08: 24, 2026-08-09: 27, 2026-08-10: 30",
    ],
    "first_asset.py": [
        '"schema": "partita.plan"',
        '"key_count": 2',
        "run status: success",
        "2026-08-08 success 108",
        "2026-08-09 success 109",
    ],
    "upstream_downstream.py": [
        "attempts per asset: {'gross': 3, 'tax_rate': 1, 'net': 3, 'summary': 1}",
        "summary: ['2026-08-10=800', '2026-08-08=640', '2026-08-09=720']",
    ],
    "partition_outcomes.py": [
        "run status: failed",
        "sales 2026-08-09 failed",
        "revenue 2026-08-09 skipped dependency_failed blocked by sales",
        "revenue 2026-08-10 success",
        "report - skipped dependency_failed blocked by revenue",
        "failed sales keys: ['2026-08-09']",
        "failed revenue keys: ()",
        "failure: builtins.RuntimeError - the export for this day has not arrived",
        "follow-up status: success attempts: 1",
        "ValueError: asset 'report' is not partitioned",
    ],
    "sync_and_async.py": [
        "planned max_concurrency: 2",
        "orders: {'berlin': 0, 'lisbon': 0, 'oslo': 20, 'rome': 20, 'vienna': 0, 'zurich': 0}",
        "at most 2 bodies at once: True",
        "overridden max_concurrency: 6",
        "at most 6 bodies at once: True",
        "run_async status: success",
        "reorder is still a plain coroutine function: 35",
    ],
    "weekly_partitions.py": [
        "week: weekly week:sunday sunday",
        "weeks: ['2026-11-29', '2026-12-06', '2026-12-13', '2026-12-20']",
        "in memory: datetime.date(2026, 12, 6)",
        "rejected: a week partition key is the first day of its week (a sunday)",
        "rejected: weekly partition key is earlier than the definition's start",
        "rejected: week partition key text is not canonical YYYY-MM-DD",
        "2026-11-29 success 29 Nov to 05 Dec",
        "2026-12-06 success 06 Dec to 12 Dec",
    ],
    "cron_partitions.py": [
        "cron: cron cron:*/15 * * * *@Europe/Berlin",
        "spring: ['2026-03-29T01:30+01:00', '2026-03-29T01:45+01:00', '2026-03-29T03:00+02:00', '2026-03-29T03:15+02:00']",
        "autumn: ['2026-10-25T02:30+02:00', '2026-10-25T02:45+02:00', '2026-10-25T02:00+01:00', '2026-10-25T02:15+01:00']",
        "01:15 UTC is 2026-10-25T02:15+01:00",
        "rejected: cron partition key is not a tick of the definition's cron expression in its time zone",
        "rejected: cron partition key text carries a UTC offset the time zone does not have at that wall time",
        "rejected: cron partition key text is not canonical YYYY-MM-DDTHH:MM+HH:MM",
        "mornings: ['2026-11-27T06:30-05:00', '2026-11-30T06:30-05:00', '2026-12-01T06:30-05:00']",
        "2026-03-29T01:45+01:00 success 00:45Z",
        "2026-03-29T03:00+02:00 success 01:00Z",
    ],
    "time_partitions.py": [
        "date: date date YYYY-MM-DD True",
        "normalized: datetime.date(2026, 8, 8)",
        "range: ['2026-08-08', '2026-08-09', '2026-08-10']",
        "rejected: date partition key text is not canonical YYYY-MM-DD",
        "rejected: a datetime is not a date partition key",
        "rejected: date partition key is earlier than the definition's start",
        "rejected: date partition key text is not a valid calendar date",
        "reversed range: range start is later than end",
        "month: monthly month YYYY-MM",
        "months: ['2025-11', '2025-12', '2026-01', '2026-02']",
        "in memory: datetime.date(2026, 2, 1)",
        "hour: hourly hour:Europe/Berlin YYYY-MM-DDTHH",
        "spring: ['2026-03-29T01', '2026-03-29T03']",
        "gap: hourly partition key names an hour that does not exist",
        "autumn: ['2026-10-25T01', '2026-10-25T02', '2026-10-25T02+01:00', '2026-10-25T03']",
        "offsets: ['2:00:00', '2:00:00', '1:00:00', '1:00:00']",
        "01:00 UTC is 2026-10-25T02+01:00",
    ],
    "static_and_multi.py": [
        "static: static static:regions False ('eu-west', 'us-east', 'apac')",
        "rejected: partition key is not one of the keys declared by static:regions",
        "multi: multi multi(day=date,region=static:regions)",
        "key format: <day: YYYY-MM-DD>|<region: one of the declared keys>",
        "in memory: MultiPartitionKey({'day': datetime.date(2026, 8, 8), 'region': 'eu-west'})",
        "dimensions: 2026-08-08 eu-west -> 2026-08-08|eu-west",
        "same key from a mapping or a MultiPartitionKey: True",
        "2026-08-08|eu-west -> eu-west shipments on 08 Aug",
        "2026-08-09|us-east -> us-east shipments on 09 Aug",
        "range: 3 keys",
        "SelectionError: partition_range is rejected by asset 'shipments' (multi(day=date,region=static:regions)): a multi partition range walks its time dimension 'day'",
        "listed: ['2026-08-08|eu-west', '2026-08-08|us-east', '2026-08-08|apac', '2026-08-09|eu-west']",
    ],
    "custom_partition_def.py": [
        "shard keys selected: 3",
        "shard 0 present=True",
        "shard '' present=True",
        "shard False present=True",
        "tenant keys selected: 2",
        "plan document mentions a tenant: False",
        "['invoices for acme', 'invoices for globex']",
        "SelectionError: partition_keys[1] is rejected by asset 'invoices' (tenant): "
        "tenant keys must be 3 to 20 letters or digits",
    ],
    "selection_forms.py": [
        "keys: keys, 2 keys, 5 attempts",
        "range: range, 7 keys, 15 attempts",
        "empty: empty, 0 keys, 1 attempts",
        "range() as keys: keys, 7 keys, 15 attempts",
        "deduplicated: ['2026-08-09', '2026-08-08']",
        "no selector: SelectionError: assets 'extract', 'load' are partitioned",
        "two forms: SelectionError: choose exactly one selection form",
        "unpartitioned closure: SelectionError: partition_keys given, but no selected asset is partitioned",
        "unpartitioned, no selector: unpartitioned, 0 keys, 1 attempts",
        "two domains: PlanningError: the selected assets span 2 partition domains",
        "bad key: SelectionError: partition_keys[1] is rejected by asset 'extract' (date)",
        "unknown field: ConfigurationError: unknown config field(s): partition_key",
        "empty run: extract skipped (no_partition_keys), 0 attempts",
        "empty run: load skipped (no_partition_keys), 0 attempts",
        "empty run: refresh_dashboard skipped (no_partition_keys), 1 attempts",
        "plan document contains the key: False",
    ],
    "partition_groups.py": [
        "groups: [{'assets': ['download', 'parse'], 'max_active_keys': 1}]",
        "task groups: {'download': 0, 'parse': 0}",
        "whole chain: ok",
        "partial selection: PlanningError: partition_groups[0]: members 'parse' are not in the planned closure",
        "not a direct chain: PlanningError: partition_groups[0]: member 'audit' does not directly depend",
        "leaves and re-enters: PlanningError: partition group 'parse'..'publish': a dependency path leaves",
        "overlapping groups: PlanningError: partition_groups[1]: asset 'download' already belongs",
        "declaration: DefinitionError: PartitionGroup max_active_keys must be at least 1",
    ],
    "cli_entries.py": ["factory flow: success 1008 visits"],
    "group_admission.py": [
        "start  extract_daily 2026-08-08",
        "finish publish_daily 2026-08-08 success",
        "start  extract_daily 2026-08-09",
        "without the group, 2026-08-09 starts before 2026-08-08 is published: True",
        "retry  extract_daily 2026-08-08 in 5s",
        "start  extract_daily 2026-08-08 (invocation 2)",
        "finish publish_daily 2026-08-08 success",
        "start  extract_daily 2026-08-09",
        "max_active_keys=2, keys in the chain at once: 2",
    ],
    "outcome_retry.py": [
        "run status: failed",
        "settlements 2026-08-08 success",
        "settlements 2026-08-09 failed",
        "settlements 2026-08-10 failed",
        "settlements 2026-08-11 skipped (resource_circuit_open)",
        "settlements 2026-08-12 skipped (resource_circuit_open)",
        "ledger 2026-08-09 skipped (dependency_failed)",
        "ledger 2026-08-12 skipped (dependency_failed)",
        "failed: ['2026-08-09', '2026-08-10']",
        "circuit skipped: ['2026-08-11', '2026-08-12']",
        "ledger circuit skipped: ()",
        "run status: success",
        "settlements 2026-08-09 success",
        "settlements 2026-08-12 success",
        "ledger 2026-08-12 success",
    ],
    "resource_policies.py": [
        "t=  0s start  berlin (invocation 1)",
        "t=  0s start  lisbon (invocation 1)",
        "t=  0s start  oslo (invocation 1)",
        "t=  0s retry  lisbon in 30s",
        "t= 30s start  rome (invocation 1)",
        "t= 30s finish rome failed",
        "t= 60s start  vienna (invocation 1)",
        "t= 60s start  zurich (invocation 1)",
        "t= 60s start  lisbon (invocation 2)",
        "t= 60s finish lisbon success",
        "run status: failed",
        "waits requested from the clock: [30.0, 30.0, 30.0]",
        "warehouse_api: 7 invocations, 5 succeeded, 2 failed",
        "retries scheduled: 1",
        "admission waits: 4, 60s in total",
    ],
    "retries_and_callbacks.py": [
        "backoff schedule: [1.0, 2.0, 3.0]",
        "on_complete run status failed, attempts {'success': 2, 'failed': 1}",
        "news success invocations: ['ok']",
        "sports success invocations: ['failed', 'failed', 'ok']",
        "weather failed invocations: ['failed', 'failed', 'failed', 'failed']",
        "failed keys: ('weather',)",
        "delays waited: [1.0, 1.0, 2.0, 2.0, 3.0]",
        "on_failure headlines weather gave up after invocation 4",
        "on_retry   headlines sports invocation 1 raised TimeoutError('feed server timed out')",
        "on_retry   headlines weather invocation 3 raised TimeoutError('feed server timed out')",
        "callback error: flow.on_failure builtins.RuntimeError the pager service is offline",
        "events: {'AttemptFinished': 3, 'AttemptRetrying': 5, 'AttemptStarted': 8, 'RunFinished': 1, 'RunStarted': 1}",
    ],
    "cancellation.py": [
        "run_async raised CancelledError",
        "run status: cancelled",
        "compress s1 success s1.gz",
        "compress s2 success s2.gz",
        "upload s1 cancelled reason: cancelled",
        "upload s2 cancelled reason: cancelled",
        "report - cancelled reason: cancelled",
    ],
    "executors.py": [
        "process executor: success total 1199996",
        "checksum bodies ran in this process: False",
        "unpicklable output: partita.errors.ExecutionError - asset 'lock_holder': "
        "its output cannot be sent back from the worker process",
        "custom executor: success total 1199996",
        "bodies submitted: {'checksum': 3, 'total': 1}",
    ],
    "terminal_assets.py": [
        "terminal assets: revenue, headcount",
        "run status: success revenue: [30, 60]",
    ],
    "portable_records.py": [
        "default version: 1",
        "v1 attempt fields: ['attempt.blocked_by', 'attempt.duration_seconds', 'attempt.failure', "
        "'attempt.finished_at', 'attempt.index', 'attempt.invocations', 'attempt.partition_key_present', "
        "'attempt.reason', 'attempt.started_at', 'attempt.status']",
        "v2 adds: ['attempt.invocation_details']",
        "v3 adds: ['callback_errors', 'resources']",
        "v4 adds: ['attempt.materialization_id', 'attempt.resolution']",
        'selection: {"kind": "keys", "domain": "static:tenants", "key_count": 2}',
        "attempt 0: success invocations 2 resolution executed",
        "  invocation details: [(1, False, 'builtins.TimeoutError'), (2, True, None)]",
        "billing_api: {'invocations': 4, 'succeeded': 1, 'failed': 3, 'retries': 2}",
        "callback error: flow.on_complete builtins.RuntimeError the chat webhook is offline",
        "attempts carry a partition_key field: False",
        "attempt 1 failure message: no invoice feed for globex",
        "with record_partition_keys=True: ['acme', 'globex']",
        "failed keys from the live result: ('globex',)",
        "ValueError: record version must be one of 1, 2, 3, 4",
    ],
    "backfills.py": [
        "first run: failed",
        "2 failed or dependency-skipped attempts upstream of or at daily_total, 1 key to rerun",
        "rerun: ['2026-08-09']",
        "missing: ['2026-08-11', '2026-08-12']",
        "backfill of missing keys: 0 of 5 selected keys lack a success of daily_total; nothing to run",
        "run: python failed {}",
        "run: backfill success {'partita.backfill': 'failed-from', 'partita.failed_from': '",
        "run: backfill success {'partita.backfill': 'missing'}",
    ],
    "attempt_logs.py": [
        "extract 1 INFO loaded 120 rows",
        "extract 2 DEBUG batch 1 of 10 parsed",
        "extract 3 DEBUG batch 2 of 10 parsed",
        "extract 4 cut 7 lines cut",
        "extract 11 DEBUG batch 10 of 10 parsed",
        "extract 12 stdout wrote extract.parquet",
        "check ERROR AssertionError: fewer rows than last week",
    ],
    "run_history.py": [
        "list: third success, 2 attempts, {'success': 2}",
        "list: second success, 2 attempts, {'success': 2}",
        "list: first failed, 6 attempts, {'failed': 1, 'skipped': 1, 'success': 4}",
        "show: first failed, range of 3 keys",
        "  exports #0 success",
        "  exports #1 failed the export for this day has not arrived",
        "  exports #2 success",
        "  daily_total #0 success",
        "  daily_total #1 skipped dependency_failed",
        "  daily_total #2 success",
        "compare: exports ['success', 'failed', 'success'] -> ['success']",
        "compare: daily_total ['success', 'skipped', 'success'] -> ['success']",
        "stored keys of the first run: [None, None, None, None, None, None]",
        "stored keys of the third run: ['2026-08-11', '2026-08-11']",
    ],
    # docs/materialization.md; run with EXAMPLE_ARGUMENTS, and step by step in the tests below
    "file_materialization.py": [
        "daily_orders body running for 2026-08-11",
        ": success",
        "daily_orders 2026-08-11 success resolution=executed materialization_id=",
    ],
    "materialization_provenance.py": [
        "run status: success (record schema partita.run-record version 4)",
        '"resolution": "executed"',
        'attempt-finished event (v4 form): {"run_id": ',
        '"resolution": "executed"',
    ],
    "materialization_invalidation.py": [
        "inspect another day: missing",
        "first run: success, executed, materialization ",
        "inspect after the first run: available (epoch 0)",
        "invalidated: epoch 1",
        "inspect after invalidation: invalidated",
        "loading the revoked record: FileMaterializationError: the record was invalidated",
        "explicit rebuild: success, executed, materialization ",
        "inspect after the rebuild: available (epoch 1)",
        "next run: success, materialized, materialization ",
        "new generation: True; reused by the next run: True",
        "the revoked generation is still on disk: True",
        "inspect a damaged copy: corrupt (epoch -) payload SHA-256 differs from its manifest",
        "inspect the old reference restored: invalidated",
    ],
    # docs/events.md
    "batch_ingestion.py": [
        "first run:",
        "  batch 40: committed 1000 rows, announced as event 1",
        "  batch 41: committed 1025 rows, announced as event 2",
        "  batch 42: committed 1050 rows, announced as event 3",
        "first run: failed (builtins.RuntimeError: batch 43: the source file is truncated)",
        "event 1: batch 40 {'rows': 1000} <- attempt of ingest, invocation 1, run first",
        "event 2: batch 41 {'rows': 1025} <- attempt of ingest, invocation 1, run first",
        "event 3: batch 42 {'rows': 1050} <- attempt of ingest, invocation 1, run first",
        "outlet events of the first run: 0",
        "consumer: batch 40 has 1000 rows",
        "consumer: batch 42 has 1050 rows",
        "second run:",
        "  batch 40: committed 1000 rows, already announced as event 1",
        "  batch 42: committed 1050 rows, already announced as event 3",
        "  batch 43: committed 1075 rows, announced as event 7",
        "  batch 44: committed 1100 rows, announced as event 8",
        "second run: success",
        "event 7: batch 43 {'rows': 1075} <- attempt of ingest, invocation 1, run second",
        "outlet: event 9: ingest None {} <- outlet of ingest, invocation 1, run second",
    ],
    "operations_signal.py": [
        "regional_export on_failure: export_cleanup event ",
        "flow on_failure: ops_incident event ",
        "run status: failed",
        "without a store: [('export_cleanup', 'attempt'), ('ops_incident', 'flow')]",
    ],
    "emission_rules.py": [
        "at import or definition time: EmissionError: partita.emit() works only while an asset body or a callback runs",
        "invocation 1:",
        "valid: event 1",
        "unknown asset: EmissionError: emit: asset 'daily_price' is not registered",
        "no key for a partitioned asset: EmissionError: emit: asset 'daily_prices' is partitioned (domain date); "
        "pass partition_key explicitly (it is never inherited from the producer's own key)",
        "key for an unpartitioned asset: EmissionError: emit: asset 'price_alert' is not partitioned",
        "key the definition rejects: EmissionError: emit: partition_key for asset 'daily_prices' is rejected by its "
        "definition (date): date partition key text is not canonical YYYY-MM-DD",
        "date without a key: EmissionError: emit: partition_date requires a partition_key",
        "naive date: EmissionError: emit: partition_date must be timezone-aware",
        "extra not an object: EmissionError: emit: extra must be a JSON object",
        "extra not strict JSON: EmissionError: emit: extra is not strict JSON: JsonCodec: extra['ratio'] is not a finite number",
        "extra too large: EmissionError: emit: extra is 70011 bytes of JSON; the limit is 65536",
        "empty dedupe_key: EmissionError: emit: dedupe_key must be a non-empty string",
        "partita.emit, a date object as key: event 2",
        "default identity: event 3",
        "dedupe_key: event 4",
        "same dedupe_key again: event 4 (duplicate)",
        "same dedupe_key, other extra: EmissionError: emit: dedupe_key was already used for a different event",
        "invocation 2:",
        "default identity: event 5",
        "dedupe_key: event 4 (duplicate)",
        "run status: success; receipts: 8; events: 5",
        "  event 2: daily_prices 2026-08-09 {} (invocation 1)",
        "  event 5: price_alert None {'level': 'high'} (invocation 2)",
        "publish_event, vendor file: event 1",
        "publish_event, vendor file again: event 1 (duplicate)",
        "publish_event without dedupe_key: event 2",
        "publish_event without dedupe_key: event 3",
        "  stored event 1: daily_prices 2026-08-10 source {'kind': 'external', 'run_id': None, 'asset': None, "
        "'partition_key_present': None, 'invocation': None}",
    ],
    "partial_aggregation.py": [
        "producer run: failed; failed days: ['2026-08-09', '2026-08-11']",
        "included 3 of 5 selected days: ['2026-08-08', '2026-08-10', '2026-08-12']",
        "not available, left out: ['2026-08-09', '2026-08-11']",
        "totals: {'orders': 5, 'revenue_cents': 6250}",
        "published orders-snapshot.json: publication ",
        "same publication as the previous snapshot: False",
    ],
    # docs/runtime-partitions.md; run with EXAMPLE_ARGUMENTS, and in the tests below
    "tenant_fanout.py": [
        "data folder: tenant-data",
        "run 1: success, discovered ['acme', 'globex', 'initech']",
        "  invoice acme: 108 EUR",
        "  invoice globex: 20 EUR",
        "  billing total: 398 EUR",
        "  discovery events:",
        "tenants acme {'plan': 'pro'}",
        "tenants globex {'plan': 'basic'}",
        "tenants initech {'plan': 'pro'}",
        "retired globex in the registry: retired",
        "run 2: success, discovered ['acme', 'initech', 'umbrella']",
        "  invoice umbrella: 180 EUR",
        "    globex   retired first seen ",
        "    umbrella active  first seen ",
        "tenants umbrella {'plan': 'pro'}",
        "run 3: success, discovered ['acme', 'globex', 'initech', 'umbrella']",
        "    globex   active  first seen ",
        "globex history: [('retired', '-'), ('reactivated', 'run 3')]",
    ],
    "runtime_rules.py": [
        "plan: discover, domain runtime:regions, key count None, attempts None (1 known before running)",
        "declared so far: ['eu-west', 'us-east']",
        "discovered: ('eu-west', 'us-east')",
        "extra: {'eu-west': {'stores': 41}, 'us-east': {'stores': 17}}",
        "  regions - success -> {'eu-west': 41, 'us-east': 17}",
        "  sales eu-west success -> 'eu-west: 41 stores'",
        "  forecast us-east success -> 'US-EAST: 17 STORES'",
        "events kept without a store: 0",
        "narrowed to us-east and apac, discovered: ('eu-west', 'us-east')",
        "  sales us-east success -> 'us-east: 17 stores'",
        "  sales apac skipped (partition_not_discovered)",
        "  forecast apac skipped (dependency_failed)",
        "max_keys=2: DiscoveryError: asset 'regions' declared more than max_keys=2 keys for runtime:regions; "
        "nothing was declared; downstream attempts: 0",
        "allowed keys: DiscoveryError: asset 'regions' declared partition_keys[1] that runtime:regions rejects: "
        "partition key is not one of the keys allowed by runtime:regions; nothing was declared; downstream attempts: 0",
        "allowed predicate: DiscoveryError: asset 'regions' declared partition_keys[0] that runtime:regions rejects: "
        "partition key is not allowed by runtime:regions; nothing was declared; downstream attempts: 0",
        "key length: DiscoveryError: asset 'regions' declared a key that runtime:regions rejects: runtime partition "
        "keys are at most 255 characters; downstream attempts: 0",
        "output mapping: DiscoveryError: asset 'regions' returned an output for a key it did not declare; declare "
        "every key with add_partition or partition_keys; downstream attempts: 0",
        "declared both ways: DiscoveryError: asset 'regions' called add_partition already; declare keys one way, "
        "not both; downstream attempts: 0",
        "corrected list, discovered: ('us-east', 'eu-west')",
        "inside a product: DefinitionError: MultiPartitionDef dimension 'region': a runtime definition cannot be a "
        "dimension of a product",
    ],
}

EXPECTED_OUTPUT.update(
    {
        # docs/triggers.md
        "batch_validation.py": [
            "store: sqlite:///",
            "producer: batch 41 committed, readiness event 1",
            "producer: batch 42 committed, readiness event 2",
            "producer: still running (paused after batch 42)",
            "consumer: validating batch 41 (event 1, 1025 rows, attempt of receive_batches)",
            "consumer: validating batch 42 (event 2, 1050 rows, attempt of receive_batches)",
            "trigger pass: started 2 consumer runs",
            "producer: failed (batch 43: the source file is truncated)",
            "trigger pass after the failure: started 0 consumer runs",
            "external: batch 41 re-announced as event 5",
            "consumer: validating batch 41 (event 5, 1030 rows, external)",
            "trigger pass after the re-announcement: started 1",
            "request: batch 41 generation 0 events [1]",
            "request: batch 42 generation 0 events [2]",
            "request: batch 41 generation 1 events [5]",
            "runs recorded: 4 (3 success, 1 failed)",
        ],
        "hourly_rollup.py": [
            "hours of 2026-10-25 in Europe/Berlin: 25 (2026-10-25T02, 2026-10-25T02+01:00)",
            "RollupMapper('day') needs 25 hourly keys for 2026-10-25",
            "after 24 hourly events: would start -, waiting ['2026-10-25']",
            "trigger pass: started 0 consumer runs",
            "still: would start -, waiting ['2026-10-25']",
            "after the last hour (2026-10-25T23): would start ['2026-10-25'], waiting -",
            "daily_usage 2026-10-25: 25 hourly events, 51 kWh",
            "trigger pass: started 1 consumer runs",
            "afterwards: would start -, waiting -",
        ],
        "runtime_triggered.py": [
            "producer run 1: success, discovered ['hamburg', 'lyon']",
            "stock_check hamburg: 1200 pallets (event 1, discovery of warehouses)",
            "stock_check lyon: 800 pallets (event 2, discovery of warehouses)",
            "trigger pass: started 2 consumer runs",
            "producer run 2: success, discovered ['hamburg', 'lyon', 'oslo']",
            "stock_check hamburg: 1200 pallets (event 5, discovery of warehouses)",
            "stock_check oslo: 300 pallets (event 7, discovery of warehouses)",
            "trigger pass: started 3 consumer runs (each discovery event is new)",
            "nothing left: started 0",
        ],
    }
)

# Command-line arguments for examples that need them, as their docs show them
# (relative paths resolve in the temporary working directory).
EXAMPLE_ARGUMENTS: dict[str, list[str]] = {
    "file_materialization.py": ["seed", "--root", "./materialized", "--partition-key", "2026-08-11"],
    "materialization_provenance.py": ["--root", "./materialized"],
    "materialization_invalidation.py": ["--root", "./materialized"],
    "partial_aggregation.py": ["--root", "./materialized", "--snapshot", "./orders-snapshot.json"],
    "tenant_fanout.py": ["--data", "./tenant-data"],
}

# Every `partita ...` command shown in README.md and docs/*.md: exit code and
# substrings expected on stdout+stderr. Keys are the command as written.
CLI_COMMANDS: dict[str, tuple[int, list[str]]] = {
    # README
    "partita run examples/quickstart.py --partition-range 2026-08-08 2026-08-10 --yes": (
        0,
        ["daily_report", "status: success"],
    ),
    "partita partitions examples/readme_example.py": (0, ["raw_events", "YYYY-MM-DD"]),
    "partita plan examples/readme_example.py --partition-range 2026-08-08 2026-08-10": (
        0,
        ["selection: range in domain date, 3 keys", "attempts: 7"],
    ),
    "partita run examples/readme_example.py --partition-key 2026-08-08 --partition-key 2026-08-09 --yes": (
        0,
        ["status: success"],
    ),
    # docs/getting-started.md
    "partita partitions examples/first_asset.py": (0, ["daily_visits", "date", "YYYY-MM-DD"]),
    "partita plan examples/first_asset.py --partition-key 2026-08-08": (
        0,
        ["selection: keys in domain date, 1 key", "attempts: 1"],
    ),
    "partita plan examples/first_asset.py --partition-key 2026-08-08 --json": (0, ['"schema": "partita.plan"']),
    "partita run examples/first_asset.py --partition-key 2026-08-08 --yes": (0, ["status: success"]),
    "partita plan examples/first_asset.py": (2, ["select partitions with --partition-key"]),
    "partita plan examples/quickstart.py --partition-range 2026-08-08 2026-08-10": (
        0,
        ["exchange_rates", "attempts: 10"],
    ),
    # docs/partitions-and-selection.md
    "partita plan examples/first_asset.py --partition-key 2026-08-08 --partition-key 2026-08-09": (
        0,
        ["selection: keys in domain date, 2 keys"],
    ),
    "partita plan examples/first_asset.py --partition-range 2026-08-08 2026-08-14": (
        0,
        ["selection: range in domain date, 7 keys"],
    ),
    "partita plan examples/first_asset.py --empty-partitions": (0, ["deliberately empty"]),
    "partita plan examples/first_asset.py --partition-key 2025-12-31": (2, ["earlier than the definition's start"]),
    "partita plan examples/partition_groups.py --partition-key 2026-08-08 --partition-key 2026-08-09": (
        0,
        ["download", "parse", "attempts: 4"],
    ),
    # docs/execution.md
    "partita run examples/group_admission.py --partition-key 2026-08-08 --partition-key 2026-08-09 --yes": (
        0,
        ["extract_daily", "publish_daily", "status: success", "attempts: 4"],
    ),
    # docs/cli.md
    "partita --help": (0, ["assets", "partitions", "plan", "run"]),
    "partita run --help": (
        0,
        ["--partition-key", "--yes", "--store", "--no-store", "--record-partition-keys", "--json"],
    ),
    "partita runs --help": (0, ["compare", "list", "show"]),
    "partita runs list": (0, ["runs in sqlite:///.partita/partita.db", "success", "failed"]),
    "partita runs list --status failed --limit 5 --json": (0, ['"schema": "partita.runs"', '"status": "failed"']),
    "partita assets examples/quickstart.py": (0, ["orders", "exchange_rates", "daily_report"]),
    "partita assets examples/quickstart.py --target daily_summary": (0, ["daily_summary"]),
    "partita assets examples/terminal_assets.py": (0, ["revenue", "headcount"]),
    "partita partitions examples/quickstart.py --json": (0, ['"schema": "partita.partitions"']),
    "partita plan examples/cli_entries.py --partition-key 2026-08-08": (3, ["none named 'flow'"]),
    "partita plan examples/cli_entries.py:visits_flow --partition-key 2026-08-08": (0, ["visits", "attempts: 1"]),
    "partita plan examples/cli_entries.py:make_flow --partition-key 2026-08-08": (
        0,
        ["visit_summary", "max concurrency: 2"],
    ),
    "partita assets examples.cli_entries:summary_flow": (0, ["visit_summary"]),
    "partita plan examples/quickstart.py --partition-key 2026-08-08 --max-concurrency 2": (
        0,
        ["max concurrency: 2"],
    ),
    "partita plan examples/quickstart.py --partition-key 2026-8-8": (2, ["not canonical YYYY-MM-DD"]),
    "partita plan examples/quickstart.py --partition-key 2026-08-08 --empty-partitions": (
        2,
        ["choose exactly one selection form"],
    ),
    "partita plan examples/quickstart.py --partition-key 2026-08-08 --json": (0, ['"schema": "partita.plan"']),
    "partita run examples/quickstart.py --partition-key 2026-08-08": (2, ["pass --yes"]),
    "partita run examples/quickstart.py --partition-key 2026-08-08 --json": (2, ['"schema": "partita.error"']),
    "partita run examples/quickstart.py --partition-key 2026-08-08 --yes --json": (
        0,
        ['"schema": "partita.run-result"'],
    ),
    "partita assets examples/missing.py --json": (3, ['"schema": "partita.error"', "does not exist"]),
    # docs/results-and-history.md
    "partita run examples/run_history.py --partition-range 2026-08-08 2026-08-10 --yes": (
        1,
        [
            "exports: 1 failed",
            "  2026-08-09  FileNotFoundError: the export for this day has not arrived",
            "daily_total: 1 skipped (dependency failed)",
            "status: failed",
            "recorded as run",
        ],
    ),
    "partita run examples/run_history.py --partition-range 2026-08-10 2026-08-12 --yes": (
        0,
        ["status: success", "recorded as run"],
    ),
    "partita plan examples/backfills.py --missing --partition-range 2026-08-08 2026-08-10": (
        0,
        ["selection: keys in domain date, 3 keys", "backfill of missing keys: 3 of 3 selected keys lack a success of daily_total"],
    ),
    "partita runs show RUN_ID": (
        0,
        ["failed", "selection: range (date, 3 keys)", "exports attempt 1: builtins.FileNotFoundError"],
    ),
    "partita runs compare RUN_A RUN_B": (0, ["(failed", "(success", "exports", "status failed"]),
    "partita runs show RUN_ID --json": (
        0,
        ['"schema": "partita.run"', '"schema": "partita.run-record"', '"version": 4'],
    ),
    "partita runs compare RUN_A RUN_B --json": (0, ['"schema": "partita.runs-compare"', '"status_changed": true']),
    "partita run examples/run_history.py --partition-key 2026-08-11 --yes --store sqlite:///history/runs.db": (
        0,
        ["status: success", "created the run-history store sqlite:///history/runs.db", "recorded as run"],
    ),
    "partita runs list --store sqlite:///history/runs.db": (0, ["runs in sqlite:///history/runs.db", "success"]),
    "partita run examples/run_history.py --partition-key 2026-08-11 --yes --no-store": (0, ["status: success"]),
    "partita run examples/run_history.py --partition-key 2026-08-11 --yes --record-partition-keys": (
        0,
        ["status: success", "recorded as run"],
    ),
    # docs/events.md (`events` commands first get `EVENT_HISTORY`)
    "partita run examples/batch_ingestion.py --yes": (
        1,
        [
            "batch 40: committed 1000 rows, announced as event",
            "batch 42: committed 1050 rows, announced as event",
            "ingest: 1 failed",
            "  RuntimeError: batch 43: the source file is truncated",
            "status: failed",
        ],
    ),
    "partita events list --asset batch": (
        0,
        ["events in sqlite:///.partita/partita.db", "attempt", "attempt", "attempt", "external"],
    ),
    "partita events list --asset batch --partition-key 41 --json": (
        0,
        [
            '"schema": "partita.events"',
            '"partition_key": "41"',
            '"rows": 1025',
            '"kind": "attempt"',
            '"asset": "ingest"',
        ],
    ),
    "partita events emit batch examples/batch_ingestion.py --partition-key 44 --extra '{\"rows\":1100}' "
    "--dedupe-key batch-44": (0, ["published at"]),
    "partita events emit batch examples/batch_ingestion.py --partition-key 44 --extra '{\"rows\":1100}' "
    "--dedupe-key batch-44 --json": (0, ['"schema": "partita.emission"', '"duplicate": true']),
    "partita run examples/operations_signal.py --partition-key eu --partition-key us --yes": (
        1,
        [
            "regional_export on_failure: export_cleanup event",
            "flow on_failure: ops_incident event",
            "regional_export: 1 failed",
            "  us  ConnectionError: the warehouse refused the connection",
            "status: failed",
        ],
    ),
    "partita events list --asset ops_incident --json": (
        0,
        [
            '"schema": "partita.events"',
            '"asset": "ops_incident"',
            '"failed_assets": [',
            '"regional_export"',
            '"kind": "flow"',
            '"asset": null',
            '"partition_key_present": null',
            '"invocation": null',
        ],
    ),
    # docs/cli.md
    "partita events --help": (0, ["emit", "list"]),
    # docs/runtime-partitions.md (registry and discovery-event commands first get `TENANT_HISTORY`)
    "partita plan examples/tenant_fanout.py": (
        0,
        [
            "tenants",
            "discovers (1)",
            "usage",
            "at run time",
            "billing_total",
            "selection: discovered at run time by 'tenants'",
            "attempts: 2 + fan-out",
        ],
    ),
    "partita run examples/tenant_fanout.py --yes": (
        0,
        ["tenants", "usage", "invoice", "billing_total", "status: success", "discovers (1)", "recorded as run"],
    ),
    "partita plan examples/tenant_fanout.py --json": (
        0,
        ['"kind": "discover"', '"key_count": null', '"keys_known_at": "run time"', '"discovers": true'],
    ),
    "partita plan examples/tenant_fanout.py --partition-key acme --partition-key hooli": (
        0,
        ["discovers (1)", "selection: keys in domain runtime:tenants, 2 keys", "attempts: 6"],
    ),
    "partita run examples/tenant_fanout.py --partition-key acme --partition-key hooli --yes": (
        0,
        ["tenants", "success", "usage", "skipped", "invoice", "skipped", "billing_total", "skipped", "status: success"],
    ),
    "partita events list --asset tenants --json": (
        0,
        [
            '"schema": "partita.events"',
            '"asset": "tenants"',
            '"partition_key": "acme"',
            '"plan": "pro"',
            '"kind": "discovery"',
        ],
    ),
    "partita partitions examples/tenant_fanout.py --domain tenants": (
        0,
        ["known partitions of runtime:tenants", "acme", "active", "globex", "active", "initech", "active"],
    ),
    "partita partitions examples/tenant_fanout.py --domain tenants --json": (
        0,
        ['"schema": "partita.partitions"', '"domain": "runtime:tenants"', '"key": "acme"', '"state": "active"'],
    ),
    "partita partitions retire tenants globex": (0, ["retired a partition of runtime:tenants (last seen "]),
    "partita partitions retire tenants globex --json": (
        0,
        [
            '"schema": "partita.partition-retired"',
            '"domain": "runtime:tenants"',
            '"key": "globex"',
            '"state": "retired"',
        ],
    ),
    # docs/cli.md
    "partita partitions --help": (0, ["--domain NAME", "partitions retire NAME KEY", "retire"]),
    "partita partitions retire --help": (0, ["NAME KEY", "--store URL", "--json"]),
}

CLI_COMMANDS.update(
    {
        # docs/triggers.md (`trigger` and `plan --pending` first get `TRIGGER_HISTORY` of their entry)
        "partita run examples/batch_validation.py --yes": (
            1,
            ["producer: batch 41 committed", "producer: batch 42 committed", "batch 43", "status: failed"],
        ),
        "partita plan examples/batch_validation.py --pending": (
            0,
            ["pending consumer runs", "validate_batches", "active", "41, 42"],
        ),
        "partita trigger examples/batch_validation.py --once": (
            0,
            ["consumer: validating batch 4", "started 2 consumer runs"],  # the two runs may print in either order
        ),
        "partita events emit meter_readings examples/hourly_rollup.py --partition-key 2026-10-25T00 "
        "--extra '{\"kwh\":2}'": (0, ["published at"]),
        "partita plan examples/hourly_rollup.py --pending": (0, ["daily_usage", "active", "2026-10-25"]),
        "partita run examples/runtime_triggered.py --yes": (0, ["warehouses", "status: success"]),
        "partita trigger examples/runtime_triggered.py --once": (
            0,
            ["stock_check ", "started 2 consumer runs"],  # the two runs may print in either order
        ),
        "partita flows pause validate_batches --entry examples/batch_validation.py": (0, ["flow validate_batches paused"]),
        "partita flows resume validate_batches --entry examples/batch_validation.py": (
            0,
            ["flow validate_batches resumed"],
        ),
        # docs/operations.md
        "partita plan examples/readme_example.py --partition-range 2026-08-08 2026-08-10 --format mermaid": (
            0,
            ["flowchart LR", 'n0["raw_events<br/>date, 3 attempts"]', "n1 --> n2", "class n0,n1 partitioned"],
        ),
        "partita assets examples/readme_example.py --format dot": (
            0,
            ["digraph lineage {", 'n0 [label="raw_events\\ndate", style=dashed];', "n1 -> n2;", "}"],
        ),
        "partita runs cancel --help": (0, ["RUN_ID", "--wait", "--timeout SECONDS", "--store URL", "--json"]),
        "partita runs cancel RUN_ID": (2, ["already finished (failed); there is nothing to cancel"]),
        "partita runs cancel RUN_ID --json": (
            2,
            ['"schema": "partita.run-cancel"', '"outcome": "finished"', '"status": "failed"'],
        ),
        # docs/operations.md: attempt logs (`runs logs` reads the runs of `HISTORY_RUNS`)
        "partita run examples/run_history.py --partition-range 2026-08-08 2026-08-09 --yes": (
            1,
            ["status: failed", "exports[2026-08-09] WARNING no export file in the drop folder yet"],  # stdout, then stderr
        ),
        "partita runs logs RUN_ID": (
            0,
            ["exports#0 INFO read 80 rows", "exports#1 WARNING no export file", "exports#2 INFO read 100 rows"],
        ),
        "partita runs logs RUN_ID --asset exports --level warning": (
            0,
            ["exports#1 WARNING no export file in the drop folder yet"],
        ),
        "partita runs logs RUN_ID --follow": (0, ["exports#1 WARNING no export file in the drop folder yet"]),
        "partita runs logs RUN_ID --json": (0, ['"schema": "partita.attempt-logs"', '"message": "read 80 rows"']),
        # docs/cli.md
        "partita serve --help": (0, ["SIGTERM", "--store", "--max-in-flight", "--poll-interval"]),
        "partita trigger --help": (0, ["--once", "--max-in-flight", "--json"]),
        "partita flows --help": (0, ["pause", "resume"]),
        "partita schedules --help": (0, ["catch-up", "pause", "--next"]),
    }
)

# What `partita trigger ... --once` and `partita plan ... --pending` read: the events of their entry's producer.
TRIGGER_HISTORY: dict[str, tuple[str, ...]] = {
    "examples/batch_validation.py": ("partita run examples/batch_validation.py --yes",),
    "examples/hourly_rollup.py": (
        "partita events emit meter_readings examples/hourly_rollup.py --partition-key 2026-10-25T00 "
        "--extra '{\"kwh\":2}'",
    ),
    "examples/runtime_triggered.py": ("partita run examples/runtime_triggered.py --yes",),
}

# What `partita runs ...` commands in the docs read: recorded in their temporary directory first.
HISTORY_RUNS = (
    "partita run examples/run_history.py --partition-range 2026-08-08 2026-08-10 --yes",
    "partita run examples/run_history.py --partition-range 2026-08-10 2026-08-12 --yes",
)
# What `partita events ...` commands in docs/events.md read: run in their
# temporary directory first (every one but the command under test).
EVENT_HISTORY = (
    "partita run examples/batch_ingestion.py --yes",
    "partita run examples/operations_signal.py --partition-key eu --partition-key us --yes",
    "partita events emit batch examples/batch_ingestion.py --partition-key 44 --extra '{\"rows\":1100}' "
    "--dedupe-key batch-44",
)
# What commands reading the tenant registry or its discovery events need: a discovering run first.
TENANT_HISTORY = ("partita run examples/tenant_fanout.py --yes",)
SCHEMAS = REPO / "docs" / "schemas"
SCHEMA_REGISTRY: Registry = Registry().with_resources(
    (path.name, Resource.from_contents(json.loads(path.read_text()), default_specification=DRAFT202012))
    for path in sorted(SCHEMAS.glob("*.json"))
)


def _environment(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["QUICKSTART_OUTPUT"] = str(tmp_path / "quickstart-out")
    env["BATCH_OUTPUT"] = str(tmp_path / "batch-out")
    env["TENANT_DATA"] = str(tmp_path / "tenant-data")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PARTITA_STORE", None)
    return env


def _partita_command() -> list[str]:
    script = Path(sys.executable).with_name("partita")
    return [str(script)] if script.exists() else [sys.executable, "-m", "partita"]


def _assert_in_order(output: str, expected: list[str]) -> None:
    position = 0
    for line in expected:
        found = output.find(line, position)
        assert found >= 0, f"missing (in order): {line!r}\n--- output ---\n{output}"
        position = found + len(line)


def _example_files() -> list[str]:
    return sorted(path.name for path in EXAMPLES.glob("*.py"))


EXPECTED_OUTPUT["project_config.py"] = [
    "run status: success",
    "store file created next to partita.toml: True",
    "launched by: python flow: daily_total tags: {'team': 'data'}",
]


EXPECTED_OUTPUT["partition_status.py"] = [
    "exports: partition_range 2026-08-07 .. 2026-08-11: {'materialized': 2, 'failed': 1, 'running': 0, 'missing': 2}",
    "failed: ['2026-08-09'] missing: ['2026-08-07', '2026-08-11']",
    "exports: partition_range 2026-08-07 .. 2026-08-11: {'materialized': 3, 'failed': 0, 'running': 0, 'missing': 2}",
    "failed: [] missing: ['2026-08-07', '2026-08-11']",
]

# docs/operations.md, `## Partition status`: `partita status` first gets `STATUS_HISTORY` of its entry.
STATUS_RUN = (
    "partita run examples/partition_status.py --partition-range 2026-08-08 2026-08-10 --yes --record-partition-keys"
)
STATUS_HISTORY: dict[str, tuple[str, ...]] = {"examples/partition_status.py": (STATUS_RUN,)}
CLI_COMMANDS.update(
    {
        STATUS_RUN: (1, ["exports: 1 failed", "status: failed"]),
        "partita status examples/partition_status.py --partition-range 2026-08-01 2026-08-31": (
            0,
            [
                "exports (date): 31 keys, --partition-range 2026-08-01 .. 2026-08-31",
                "# materialized 2  x failed 1  > running 0  . missing 28",
                "2026-08  .......#x#.....................",
                "legend: # materialized",
            ],
        ),
        "partita status examples/partition_status.py --asset exports --partition-range 2026-08-01 2026-08-31 --json": (
            0,
            ['"schema":"partita.partition-status"', '"failed":1'],
        ),
    }
)


EXPECTED_OUTPUT["batched_consumers.py"] = [
    "consumer runs: 3 for 50 keys",
    "keys per run: [20, 20, 10]",
    "every attempt saw only its own key's event: True",
    "a second pass starts: 0 runs",
]
EXPECTED_OUTPUT["dask_executor.py"] = ["run status: success", "reports: [10, 20, 30]"]
EXPECTED_OUTPUT["shared_pool.py"] = ["runs: success, success", "bodies inside at once, at most: 2"]

CLI_COMMANDS.update(
    {
        # docs/cli.md: no run holds a slot of the example's pool, and no store exists yet
        "partita pools examples/shared_pool.py": (0, ["pool warehouse_api: 0 of 2 slots held"]),
        "partita pools examples/shared_pool.py --json": (0, ['"name": "warehouse_api"', '"max_concurrency": 2']),
    }
)

EXPECTED_OUTPUT["scheduled_reports.py"] = [
    "hourly_snapshot: cron 0 * * * * in UTC, catch-up latest",
    "nightly_report: cron 0 0 * * * in Europe/Berlin, catch-up 7",
]

EXPECTED_OUTPUT["partition_mappers.py"] = [
    "fan-out: 23 ('2026-03-29T00', '2026-03-29T01', '2026-03-29T03')",
    "fan-out needs: ('2026-03-29',)",
    "lag: ('2026-03-28',)",
    "window: ('2026-03-27', '2026-03-28', '2026-03-29')",
    "first day: ()",
    "Berlin day over UTC hours: 2026-03-28T23 .. 2026-03-29T21 23",
    "needed of 24 with max_missing=2: 22",
    "segments: ('2026-03-29|retail', '2026-03-29|online')",
]
EXPECTED_OUTPUT["cross_domain_report.py"] = [
    "plan: hour:Europe/Berlin: 71 keys, 71 attempts",
    "plan: date: 3 keys, 6 attempts",
    "2026-03-28 24 hours, 2760 events busiest 2026-03-28T23",
    "2026-03-29 23 hours, 2740 events busiest 2026-03-29T23",
    "running total on 2026-01-07: 28",
]
CLI_COMMANDS.update(
    {
        # docs/partitions-and-selection.md: the plan of a run across two domains
        "partita plan examples/cross_domain_report.py:flow --partition-range 2026-03-28 2026-03-30": (
            0,
            [
                "hourly_events  -",
                "daily_report   hourly_events via RollupMapper('day')",
                "selection: range in domain date, 3 keys",
                "domain hour:Europe/Berlin: 71 keys, 71 attempts (hourly_events)",
                "domain date: 3 keys, 6 attempts (daily_report, busiest_hour)",
                "attempts: 77",
            ],
        ),
    }
)


def test_every_example_has_expected_output():
    assert sorted(EXPECTED_OUTPUT) == _example_files()


@pytest.mark.parametrize("name", _example_files())
def test_example_runs_as_a_script(name: str, tmp_path: Path):
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *EXAMPLE_ARGUMENTS.get(name, [])],
        cwd=tmp_path,
        env=_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    _assert_in_order(completed.stdout, EXPECTED_OUTPUT.get(name, []))


def _example_output(name: str, tmp_path: Path) -> list[str]:
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=tmp_path,
        env=_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.splitlines()


def test_group_admission_moves_one_key_through_the_whole_chain_before_the_next(tmp_path: Path):
    lines = _example_output("group_admission.py", tmp_path)
    assert lines[:8] == [
        "start  extract_daily 2026-08-08",
        "finish extract_daily 2026-08-08 success",
        "start  publish_daily 2026-08-08",
        "finish publish_daily 2026-08-08 success",
        "start  extract_daily 2026-08-09",
        "finish extract_daily 2026-08-09 success",
        "start  publish_daily 2026-08-09",
        "finish publish_daily 2026-08-09 success",
    ]
    # A key waiting for a retry keeps its group slot: the next key starts only afterwards.
    retried = lines[lines.index("without the group, 2026-08-09 starts before 2026-08-08 is published: True") + 1 :]
    assert retried[:6] == [
        "start  extract_daily 2026-08-08",
        "retry  extract_daily 2026-08-08 in 5s",
        "start  extract_daily 2026-08-08 (invocation 2)",
        "finish extract_daily 2026-08-08 success",
        "start  publish_daily 2026-08-08",
        "finish publish_daily 2026-08-08 success",
    ]
    assert retried[6] == "start  extract_daily 2026-08-09"


def test_outcome_retry_reruns_exactly_the_failed_and_circuit_skipped_keys(tmp_path: Path):
    lines = _example_output("outcome_retry.py", tmp_path)
    second = lines[lines.index("run status: success") + 1 :]
    assert [line.split()[:2] for line in second] == [
        [asset_name, day]
        for asset_name in ("settlements", "ledger")
        for day in ("2026-08-09", "2026-08-10", "2026-08-11", "2026-08-12")
    ]
    assert all(line.endswith(" success") for line in second)


def _documented_commands() -> list[tuple[Path, str]]:
    found = []
    for document in DOCUMENTS:
        in_shell_block = False
        for line in document.read_text().splitlines():
            stripped = line.strip()
            if stripped.startswith("```"):
                in_shell_block = not in_shell_block and stripped in ("```bash", "```console", "```sh")
                continue
            if not in_shell_block:
                continue
            match = re.search(r"(?:^|/)partita\s+(.*)$", stripped.removeprefix("$ "))
            if match:
                found.append((document, "partita " + " ".join(match.group(1).split())))
    return found


def test_every_documented_command_is_tested():
    documented = _documented_commands()
    assert documented, "no partita commands found in README.md or docs/"
    untested = sorted({f"{path.name}: {command}" for path, command in documented if command not in CLI_COMMANDS})
    assert not untested, "commands shown in the docs but not tested here:\n" + "\n".join(untested)
    shown = {command for _, command in documented}
    stale = sorted(command for command in CLI_COMMANDS if command not in shown)
    assert not stale, "commands tested here but no longer shown in the docs:\n" + "\n".join(stale)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "examples").symlink_to(EXAMPLES, target_is_directory=True)
    return tmp_path


def _partita(arguments: list[str], workdir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_partita_command(), *arguments],
        cwd=workdir,
        env=_environment(workdir),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


class Histories:
    """What documented commands read (recorded runs, events), recorded once per session and copied per test.

    Each history is a tuple of commands run in a template folder laid out
    like `workdir`; a test gets a copy of what they wrote, so it may change
    its store freely. Saves several ``partita`` processes per test.
    """

    def __init__(self, root: Path) -> None:
        self._root = root
        self._templates: dict[tuple[str, ...], Path] = {}
        self._run_ids: dict[tuple[str, ...], list[str]] = {}

    def replay(self, commands: tuple[str, ...], workdir: Path) -> Path:
        """Give ``workdir`` what ``commands`` write; returns the template they ran in."""
        template = self._templates.get(commands)
        if template is None:
            template = self._root / f"history-{len(self._templates)}"
            template.mkdir()
            (template / "examples").symlink_to(EXAMPLES, target_is_directory=True)
            for command in commands:
                _partita(shlex.split(command)[1:], template)
            self._templates[commands] = template
        def own_link(folder: str, _names: list[str]) -> list[str]:
            return ["examples"] if folder == str(template) else []  # workdir links the examples itself

        shutil.copytree(template, workdir, dirs_exist_ok=True, ignore=own_link)
        return template

    def run_ids(self, commands: tuple[str, ...], store: list[str], workdir: Path) -> list[str]:
        """The ids of the runs ``commands`` recorded, newest first (listed once per history)."""
        template = self.replay(commands, workdir)
        if commands not in self._run_ids:
            listed = json.loads(_partita(["runs", "list", "--json", *store], template).stdout)
            self._run_ids[commands] = [run["run_id"] for run in listed["runs"]]
        return self._run_ids[commands]


@pytest.fixture(scope="session")
def histories(tmp_path_factory: pytest.TempPathFactory) -> Histories:
    return Histories(tmp_path_factory.mktemp("histories"))


def _with_history(arguments: list[str], workdir: Path, histories: Histories) -> list[str]:
    """Record `HISTORY_RUNS` in the store the command reads, then fill in the run id placeholders."""
    store = arguments[arguments.index("--store") : arguments.index("--store") + 2] if "--store" in arguments else []
    commands = tuple(" ".join([command, *(shlex.quote(part) for part in store)]) for command in HISTORY_RUNS)
    second, first = histories.run_ids(commands, store, workdir)
    ids = {"RUN_ID": first, "RUN_A": first, "RUN_B": second}
    return [ids.get(argument, argument) for argument in arguments]


def _assert_matches_schema(document: dict) -> None:
    name = document["schema"].removeprefix("partita.") + f".v{document['version']}.json"
    validator = Draft202012Validator(json.loads((SCHEMAS / name).read_text()), registry=SCHEMA_REGISTRY)
    errors = [f"{error.json_path}: {error.message}" for error in validator.iter_errors(document)]
    assert not errors, f"document does not match docs/schemas/{name}:\n" + "\n".join(errors[:10])


def _reads_tenant_registry(arguments: list[str]) -> bool:
    """`partitions --domain`, `partitions retire` and the tenants' events read what a discovering run wrote."""
    if "--help" in arguments:
        return False
    if arguments[0] == "partitions":
        return "--domain" in arguments or arguments[1] == "retire"
    return arguments[0] == "events" and "tenants" in arguments


@pytest.mark.parametrize("command", sorted(CLI_COMMANDS))
def test_documented_command(command: str, workdir: Path, histories: Histories):
    expected_code, expected_text = CLI_COMMANDS[command]
    arguments = shlex.split(command)[1:]  # as a shell splits it: quoted JSON stays one argument
    if arguments[0] == "runs" and "--help" not in arguments:
        arguments = _with_history(arguments, workdir, histories)
    prior: list[str] = []  # one history, so that what each command writes lands in the same store
    if arguments[0] == "events" and "--help" not in arguments:
        prior += [earlier for earlier in EVENT_HISTORY if earlier != command]  # not the command itself
    if arguments[0] == "trigger" or (arguments[0] == "plan" and "--pending" in arguments):
        prior += TRIGGER_HISTORY.get(arguments[1], ())
    if arguments[0] == "status":
        prior += STATUS_HISTORY.get(arguments[1], ())
    if _reads_tenant_registry(arguments):
        prior += TENANT_HISTORY
    if prior:
        histories.replay(tuple(prior), workdir)
    completed = subprocess.run(
        [*_partita_command(), *arguments],
        cwd=workdir,
        env=_environment(workdir),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == expected_code, output
    _assert_in_order(output, expected_text)
    if "--json" in arguments and "--help" not in arguments:
        document = json.loads(completed.stdout)  # exactly one document on stdout
        assert document["version"] == 1
        _assert_matches_schema(document)


def test_quickstart_range_writes_one_report_per_day(workdir: Path):
    command = "partita run examples/quickstart.py --partition-range 2026-08-08 2026-08-10 --yes"
    completed = subprocess.run(
        [*_partita_command(), *command.split()[1:]],
        cwd=workdir,
        env=_environment(workdir),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    reports = sorted(path.name for path in (workdir / "quickstart-out").glob("*.csv"))
    assert reports == ["report-2026-08-08.csv", "report-2026-08-09.csv", "report-2026-08-10.csv"]
    header = (workdir / "quickstart-out" / reports[0]).read_text().splitlines()[0]
    assert header == "product,units,revenue_eur"


def test_run_json_document_carries_no_raw_keys(workdir: Path):
    completed = subprocess.run(
        [*_partita_command(), "run", "examples/first_asset.py", "--partition-key", "2026-08-08", "--yes", "--json"],
        cwd=workdir,
        env=_environment(workdir),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert document["schema"] == "partita.run-result"
    assert document["plan"]["schema"] == "partita.plan"
    assert document["result"]["selection"] == {"kind": "keys", "domain": "date", "key_count": 1}
    assert "2026-08-08" not in completed.stdout


def _python_blocks(document: Path) -> list[tuple[str, str]]:
    """(example file named before the block, block text) for each python block."""
    text = document.read_text()
    blocks = []
    for match in re.finditer(r"```python\n(.*?)```", text, flags=re.DOTALL):
        before = text[: match.start()]
        named = re.findall(r"examples/(\w+\.py)", before)
        blocks.append((named[-1] if named else "", match.group(1)))
    return blocks


def _chunks(block: str) -> list[list[str]]:
    """Split a block at elision lines (`# ...`) into dedented line runs."""
    chunks: list[list[str]] = [[]]
    for line in block.splitlines():
        if line.strip() in ("# ...", "..."):
            chunks.append([])
        else:
            chunks[-1].append(line)
    result = []
    for chunk in chunks:
        while chunk and not chunk[0].strip():
            chunk.pop(0)
        while chunk and not chunk[-1].strip():
            chunk.pop()
        if chunk:
            result.append(textwrap.dedent("\n".join(chunk)).splitlines())
    return result


def _contains_run(source: list[str], run: list[str]) -> bool:
    for start in range(len(source) - len(run) + 1):
        window = textwrap.dedent("\n".join(source[start : start + len(run)])).splitlines()
        if window == run:
            return True
    return False


@pytest.mark.parametrize("document", sorted((REPO / "docs").glob("*.md")), ids=lambda path: path.name)
def test_python_blocks_in_docs_are_excerpts_of_examples(document: Path):
    blocks = _python_blocks(document)
    for named, block in blocks:
        assert named, f"{document.name}: a python block is not preceded by the examples/ file it shows"
        source = (EXAMPLES / named).read_text().splitlines()
        for run in _chunks(block):
            assert _contains_run(source, run), (
                f"{document.name}: block is not an excerpt of examples/{named}:\n" + "\n".join(run)
            )


# --- docs/materialization.md: examples run as separate processes sharing one store root


def _run_example(name: str, arguments: list[str], workdir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *arguments],
        cwd=workdir,
        env=_environment(workdir),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _attempt_lines(output: str) -> dict[str, list[str]]:
    """`asset key status resolution=R materialization_id=M` lines, by asset."""
    found: dict[str, list[str]] = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[3].startswith("resolution="):
            resolution, materialization_id = parts[3].split("=", 1)[1], parts[4].split("=", 1)[1]
            found[parts[0]] = [parts[2], resolution, materialization_id]
    return found


def test_file_materialization_retry_in_a_new_process_loads_the_committed_producer(tmp_path: Path):
    options = ["--root", "./materialized", "--partition-key", "2026-08-11"]

    seed = _run_example("file_materialization.py", ["seed", *options], tmp_path)
    assert seed.returncode == 0, seed.stdout + seed.stderr
    assert "daily_orders body running for 2026-08-11" in seed.stdout
    status, resolution, committed = _attempt_lines(seed.stdout)["daily_orders"]
    assert (status, resolution) == ("success", "executed")
    assert re.fullmatch(r"[0-9a-f]{32}", committed)

    fail = _run_example("file_materialization.py", ["fail", *options], tmp_path)
    assert fail.returncode == 1, fail.stdout + fail.stderr
    attempts = _attempt_lines(fail.stdout)
    assert attempts["daily_orders"] == ["success", "materialized", committed]
    assert attempts["order_summary"] == ["failed", "-", "-"]
    assert "failure: builtins.KeyError: 'amount'" in fail.stdout
    assert "body running" not in fail.stdout

    retry = _run_example("file_materialization.py", ["retry", *options], tmp_path)
    assert retry.returncode == 0, retry.stdout + retry.stderr
    attempts = _attempt_lines(retry.stdout)
    assert attempts["daily_orders"] == ["success", "materialized", committed]
    assert attempts["order_summary"][:2] == ["success", "executed"]
    assert attempts["order_summary"][2] != committed
    assert "body running" not in retry.stdout  # the producer's body was not called


def test_file_materialization_fail_without_seed_commits_the_producer_before_the_consumer_fails(tmp_path: Path):
    options = ["--root", "./materialized", "--partition-key", "2026-08-11"]
    fail = _run_example("file_materialization.py", ["fail", *options], tmp_path)
    assert fail.returncode == 1, fail.stdout + fail.stderr
    status, resolution, committed = _attempt_lines(fail.stdout)["daily_orders"]
    assert (status, resolution) == ("success", "executed")

    retry = _run_example("file_materialization.py", ["retry", *options], tmp_path)
    assert retry.returncode == 0, retry.stdout + retry.stderr
    assert _attempt_lines(retry.stdout)["daily_orders"] == ["success", "materialized", committed]


def test_file_materialization_rejects_a_non_canonical_key_like_the_cli(tmp_path: Path):
    completed = _run_example(
        "file_materialization.py", ["seed", "--root", "./materialized", "--partition-key", "2026-8-11"], tmp_path
    )
    assert completed.returncode == 2
    assert "not canonical YYYY-MM-DD" in completed.stderr
    assert not (tmp_path / "materialized").exists()


def _provenance(output: str) -> tuple[dict, dict]:
    result = event = None
    for line in output.splitlines():
        if line.startswith("result attempt (v4): "):
            result = json.loads(line.removeprefix("result attempt (v4): "))
        if line.startswith("attempt-finished event (v4 form): "):
            event = json.loads(line.removeprefix("attempt-finished event (v4 form): "))
    assert result is not None and event is not None, output
    return result, event


def test_materialization_provenance_is_executed_then_materialized_with_the_same_id(tmp_path: Path):
    first = _run_example("materialization_provenance.py", ["--root", "./materialized"], tmp_path)
    assert first.returncode == 0, first.stderr
    second = _run_example("materialization_provenance.py", ["--root", "./materialized"], tmp_path)
    assert second.returncode == 0, second.stderr

    (result, event), (again, again_event) = _provenance(first.stdout), _provenance(second.stdout)
    committed = result["materialization_id"]
    assert re.fullmatch(r"[0-9a-f]{32}", committed)
    assert (result["resolution"], result["invocations"]) == ("executed", 1)
    assert (event["resolution"], event["materialization_id"]) == ("executed", committed)
    assert (again["resolution"], again["invocations"], again["materialization_id"]) == ("materialized", 0, committed)
    assert (again_event["resolution"], again_event["materialization_id"]) == ("materialized", committed)
    assert event["run_id"] != again_event["run_id"]
    assert "2026-08-11" not in first.stdout + second.stdout  # portable: no raw key


def test_materialization_invalidation_rebuilds_in_a_new_epoch_and_the_rebuild_is_reused(tmp_path: Path):
    completed = _run_example("materialization_invalidation.py", ["--root", "./materialized"], tmp_path)
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    ids = {line.split(":")[0]: line.split()[-1] for line in lines if "materialization " in line and ": success" in line}
    assert ids["first run"] != ids["explicit rebuild"] == ids["next run"]
    assert lines.count("  daily_prices body running for 2026-08-11") == 2  # first run and the rebuild only
    ledgers = list((tmp_path / "materialized" / "invalidations").rglob("*.json"))
    assert len(ledgers) == 1
    ledger = json.loads(ledgers[0].read_text())
    assert [entry["epoch"] for entry in ledger["revocations"]] == [1]
    assert "2026-08-11" not in " ".join(str(path) for path in (tmp_path / "materialized").rglob("*"))


def test_partial_aggregation_publishes_the_same_selection_with_the_same_id(tmp_path: Path):
    arguments = ["--root", "./materialized", "--snapshot", "./orders-snapshot.json"]
    first = _run_example("partial_aggregation.py", arguments, tmp_path)
    assert first.returncode == 0, first.stderr
    snapshot = json.loads((tmp_path / "orders-snapshot.json").read_text())
    second = _run_example("partial_aggregation.py", arguments, tmp_path)
    assert second.returncode == 0, second.stderr
    again = json.loads((tmp_path / "orders-snapshot.json").read_text())

    def publication(output: str) -> str:
        return re.search(r"publication ([0-9a-f]{64})", output).group(1)

    assert publication(first.stdout) == publication(second.stdout) == snapshot["publication_id"]
    assert "same publication as the previous snapshot: True" in second.stdout
    assert again == snapshot
    ids = snapshot["receipt"]["materialization_ids"]
    assert ids == sorted(ids) and len(ids) == 3
    assert snapshot["publication_id"] == hashlib.sha256("\n".join(ids).encode("ascii")).hexdigest()
    assert [row["day"] for row in snapshot["rows"]] == ["2026-08-08", "2026-08-10", "2026-08-12"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["materialized", "orders-snapshot.json"]


# --- docs/events.md: events published before a failure stay published


def test_batch_ingestion_keeps_the_batches_committed_before_the_failure_published(tmp_path: Path):
    from partita import SourceKind, open_store

    completed = _run_example(
        "batch_ingestion.py", ["--out", "./batches", "--store", "sqlite:///store/events.db"], tmp_path
    )
    assert completed.returncode == 0, completed.stderr
    files = sorted(path.name for path in (tmp_path / "batches").iterdir())
    assert files == [f"batch-{number}.csv" for number in range(40, 45)]  # no temporary file is left behind
    assert len((tmp_path / "batches" / "batch-41.csv").read_text().splitlines()) == 1 + 1025

    store = open_store(f"sqlite:///{tmp_path}/store/events.db")
    try:
        second, first = store.list_runs(limit=3)[0], store.list_runs(limit=3)[-1]
        assert (first.status, second.status) == ("failed", "success")
        batches = store.list_events(asset="batch")
        consumer_outlets = store.list_events(asset="validated_batch")
    finally:
        store.close()
    assert [(event.partition_key, event.extra) for event in batches] == [
        (str(number), {"rows": 1000 + 25 * (number - 40)}) for number in range(40, 45)
    ]
    assert [event.source.run_id for event in batches] == [first.run_id] * 3 + [second.run_id] * 2
    for event in batches:
        assert event.source.kind is SourceKind.ATTEMPT
        assert (event.source.asset, event.source.partition_key_present, event.source.invocation) == ("ingest", False, 1)
    # the consumer validates the three batches concurrently: their outlets are stored in completion order
    assert sorted(event.partition_key for event in consumer_outlets) == ["40", "41", "42"]
    assert {event.source.kind for event in consumer_outlets} == {SourceKind.OUTLET}


def test_batch_ingestion_as_a_cli_entry_publishes_three_batches_from_the_failed_run(workdir: Path):
    ran = _partita(["run", "examples/batch_ingestion.py", "--yes"], workdir)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    listed = _partita(["events", "list", "--asset", "batch", "--json"], workdir)
    assert listed.returncode == 0, listed.stderr
    events = json.loads(listed.stdout)["events"]
    runs = json.loads(_partita(["runs", "list", "--json"], workdir).stdout)["runs"]
    assert [run["status"] for run in runs] == ["failed"]
    assert [event["partition_key"] for event in events] == ["40", "41", "42"]
    assert {event["source"]["run_id"] for event in events} == {runs[0]["run_id"]}
    assert sorted(path.name for path in (workdir / "batch-out").iterdir()) == [
        "batch-40.csv",
        "batch-41.csv",
        "batch-42.csv",
    ]
    again = _partita(["run", "examples/batch_ingestion.py", "--yes"], workdir)
    assert "already announced as event" in again.stdout
    relisted = json.loads(_partita(["events", "list", "--asset", "batch", "--json"], workdir).stdout)["events"]
    assert relisted == events  # the retried run announced nothing twice


def _sources(output: str) -> list[dict]:
    return [
        json.loads(line.removeprefix("  source: ")) for line in output.splitlines() if line.startswith("  source: ")
    ]


def test_operations_signal_records_flow_and_attempt_provenance(tmp_path: Path):
    from partita import open_store

    url = f"sqlite:///{tmp_path}/ops.db"
    completed = _run_example("operations_signal.py", ["--store", url], tmp_path)
    assert completed.returncode == 0, completed.stderr
    by_kind = {source["kind"]: source for source in _sources(completed.stdout)}
    assert sorted(by_kind) == ["attempt", "flow", "outlet"]
    assert by_kind["flow"] == {
        "kind": "flow",
        "run_id": "<run id>",
        "asset": None,
        "partition_key_present": None,
        "invocation": None,
    }
    assert by_kind["attempt"] == {
        "kind": "attempt",
        "run_id": "<run id>",
        "asset": "regional_export",
        "partition_key_present": True,
        "invocation": 1,
    }
    store = open_store(url)
    try:
        (incident,) = store.list_events(asset="ops_incident")
        (cleanup,) = store.list_events(asset="export_cleanup")
    finally:
        store.close()
    assert incident.partition_key is None
    assert incident.extra == {"run_id": incident.source.run_id, "failed_assets": ["regional_export"]}
    assert (cleanup.partition_key, cleanup.extra["run_id"]) == ("us", incident.source.run_id)


# --- docs/runtime-partitions.md: tenants discovered from a table, the registry follows the table


def _tenant_runs(output: str) -> dict[str, dict[str, list[str]]]:
    """Per `run N:` block: `registry` lines as [key, state, last run] and discovery `events` as [id, key]."""
    runs: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for line in output.splitlines():
        if line.startswith("run "):
            current = runs.setdefault(line.split(":")[0], {"registry": [], "events": []})
        elif line.startswith("    event "):
            number, rest = line.removeprefix("    event ").split(": ", 1)
            current["events"].append(f"{number} {rest.split()[1]}")
        elif line.startswith("    ") and " first seen " in line:
            key, state = line.split()[:2]
            current["registry"].append(f"{key} {state} {line.rsplit('(', 1)[1].rstrip(')')}")
    return runs


def test_tenant_fanout_registry_shows_the_new_tenant_and_the_retired_one(tmp_path: Path):
    completed = _run_example("tenant_fanout.py", ["--data", "./tenant-data"], tmp_path)
    assert completed.returncode == 0, completed.stderr
    runs = _tenant_runs(completed.stdout)
    assert runs["run 1"]["registry"] == ["acme active run 1", "globex active run 1", "initech active run 1"]
    assert runs["run 2"]["registry"] == [
        "acme active run 2",
        "globex retired run 1",  # retired, and no longer discovered: last seen in run 1
        "initech active run 2",
        "umbrella active run 2",  # the new tenant
    ]
    assert runs["run 3"]["registry"] == [
        "acme active run 3",
        "globex active run 3",  # discovered again: reactivated
        "initech active run 3",
        "umbrella active run 3",
    ]
    # One discovery event per active tenant; `hooli` is inactive and never discovered. Between the
    # runs' discovery events lie the outlets of usage, invoice and billing_total, none for the producer.
    assert runs["run 1"]["events"] == ["1 acme", "2 globex", "3 initech"]
    assert runs["run 2"]["events"] == ["11 acme", "12 initech", "13 umbrella"]
    assert runs["run 3"]["events"] == ["21 acme", "22 globex", "23 initech", "24 umbrella"]
    assert "hooli" not in completed.stdout
    assert sorted(path.name for path in (tmp_path / "tenant-data").iterdir() if path.suffix == ".db") == [
        "partita.db",
        "tenants.db",
    ]


def test_tenant_fanout_without_data_uses_a_new_temporary_folder_it_prints(tmp_path: Path):
    completed = _run_example("tenant_fanout.py", [], tmp_path)
    assert completed.returncode == 0, completed.stderr
    first_line = completed.stdout.splitlines()[0]
    assert first_line.startswith("data folder: ")
    folder = Path(first_line.removeprefix("data folder: "))
    try:
        assert folder.is_absolute() and (folder / "tenants.db").exists() and (folder / "partita.db").exists()
        assert "globex history: [('retired', '-'), ('reactivated', 'run 3')]" in completed.stdout
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert list(tmp_path.iterdir()) == []  # nothing written to the working directory


def _tenant_table_change(workdir: Path, statement: str, *parameters: object) -> None:
    with contextlib.closing(sqlite3.connect(workdir / "tenant-data" / "tenants.db")) as connection, connection:
        connection.execute(statement, parameters)


def _registry(workdir: Path) -> dict[str, dict]:
    listed = _partita(["partitions", "examples/tenant_fanout.py", "--domain", "tenants", "--json"], workdir)
    assert listed.returncode == 0, listed.stderr
    document = json.loads(listed.stdout)
    _assert_matches_schema(document)
    return {entry["key"]: entry for entry in document["keys"]}


def test_tenant_fanout_as_a_cli_entry_follows_the_tenant_table(workdir: Path):
    empty = _partita(["partitions", "examples/tenant_fanout.py", "--domain", "tenants"], workdir)
    assert "No keys of runtime:tenants have been discovered yet." in empty.stdout + empty.stderr
    first = _partita(["run", "examples/tenant_fanout.py", "--yes"], workdir)
    assert first.returncode == 0, first.stdout + first.stderr
    assert (workdir / "tenant-data" / "tenants.db").exists()  # created and seeded from $TENANT_DATA
    assert {key: entry["state"] for key, entry in _registry(workdir).items()} == {
        "acme": "active",
        "globex": "active",
        "initech": "active",
    }

    _tenant_table_change(workdir, "INSERT INTO tenants VALUES ('umbrella', 'pro', 20, 1)")
    _tenant_table_change(workdir, "UPDATE tenants SET active = 0 WHERE name = ?", "globex")
    retired = _partita(["partitions", "retire", "tenants", "globex", "--json"], workdir)
    assert retired.returncode == 0, retired.stderr
    assert json.loads(retired.stdout)["partition"]["state"] == "retired"
    second = _partita(["run", "examples/tenant_fanout.py", "--yes"], workdir)
    assert second.returncode == 0, second.stdout + second.stderr

    registry = _registry(workdir)
    assert {key: entry["state"] for key, entry in registry.items()} == {
        "acme": "active",
        "globex": "retired",
        "initech": "active",
        "umbrella": "active",
    }
    assert registry["globex"]["last_seen"] < registry["acme"]["last_seen"]
    assert registry["umbrella"]["first_seen"] > registry["acme"]["first_seen"]
    runs = [run["run_id"] for run in json.loads(_partita(["runs", "list", "--json"], workdir).stdout)["runs"]]
    assert registry["umbrella"]["last_run_id"] == registry["acme"]["last_run_id"] == runs[0]
    assert registry["globex"]["last_run_id"] == runs[1]

    listed = _partita(["events", "list", "--asset", "tenants", "--json"], workdir)
    events = json.loads(listed.stdout)["events"]
    _assert_matches_schema(json.loads(listed.stdout))
    by_run = {run_id: [e["partition_key"] for e in events if e["source"]["run_id"] == run_id] for run_id in runs}
    assert by_run == {runs[1]: ["acme", "globex", "initech"], runs[0]: ["acme", "initech", "umbrella"]}
    assert {event["source"]["kind"] for event in events} == {"discovery"}  # no outlet event for the producer
    assert {event["extra"]["plan"] for event in events} == {"pro", "basic"}

    unknown = _partita(["partitions", "retire", "tenants", "hooli"], workdir)
    assert unknown.returncode == 2
    assert "has no known partition with that key" in unknown.stderr
