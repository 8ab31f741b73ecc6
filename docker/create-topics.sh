#!/bin/sh
# One-shot topic creation for docker/compose.yaml (runs in the apache/kafka image).
#
# Creates the ad app's input topics (impressions, clicks: one co-partition group,
# so the same count) and the topics it writes to, all with ADS_PARTITIONS
# partitions, the count the app declares; then checks that every topic has that
# count (a topic left over with another count stops here, before any worker).
# Internal topics (changelogs, repartition topics) are created by the workers
# with STREAMJOIN_REPLICATION_FACTOR.
#
# Environment: BOOTSTRAP (host:port,...), ADS_PARTITIONS, ADS_TOPIC_PREFIX
# (optional), REPLICATION_FACTOR (default 3), KAFKA_BIN (default /opt/kafka/bin).
set -eu

bin="${KAFKA_BIN:-/opt/kafka/bin}"
bootstrap="${BOOTSTRAP:?set BOOTSTRAP to host:port of the brokers}"
partitions="${ADS_PARTITIONS:?set ADS_PARTITIONS to the partition count the app declares}"
replication="${REPLICATION_FACTOR:-3}"
prefix="${ADS_TOPIC_PREFIX:-}"
topics="impressions clicks attributed-clicks duplicate-clicks unattributed-clicks ads-dead-letters"

tries=0
until "$bin/kafka-topics.sh" --bootstrap-server "$bootstrap" --list >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -ge 60 ]; then
        echo "create-topics: no broker answers at $bootstrap" >&2
        exit 1
    fi
    sleep 2
done

for name in $topics; do
    topic="$prefix$name"
    "$bin/kafka-topics.sh" --bootstrap-server "$bootstrap" --create --if-not-exists \
        --topic "$topic" --partitions "$partitions" --replication-factor "$replication"
    count=$("$bin/kafka-topics.sh" --bootstrap-server "$bootstrap" --describe --topic "$topic" \
        | sed -n 's/.*PartitionCount: *\([0-9][0-9]*\).*/\1/p' | head -n 1)
    if [ "$count" != "$partitions" ]; then
        echo "create-topics: topic $topic has ${count:-no} partitions but ADS_PARTITIONS is" \
            "$partitions; delete it or set ADS_PARTITIONS to its count" >&2
        exit 1
    fi
    echo "create-topics: $topic: $partitions partitions, replication factor $replication"
done
