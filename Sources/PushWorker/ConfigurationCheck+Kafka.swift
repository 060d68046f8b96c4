import Logging
import PushCore
import PushKafka
import PushPipeline
import PushPluginAPI

extension ConfigurationCheck {
    /// The topics the worker reads and writes, by role; the urgent topic only when it is another topic than the jobs'.
    static func topics(_ pipeline: PipelineConfiguration) -> [(role: String, name: String)] {
        var topics = [("jobs", pipeline.jobsTopic)]
        if let urgent = pipeline.urgentTopic, urgent != pipeline.jobsTopic { topics.append(("urgent", urgent)) }
        return topics + [("outcomes", pipeline.outcomesTopic), ("dead letters", pipeline.deadLetterTopic)]
    }

    /// `kafka metadata` (the brokers answer through the configured security settings), `kafka topic <role>` for each
    /// topic, `kafka group <id>` for each lane's consumer group (its committed offsets readable).
    static func kafkaChecks(_ configuration: WorkerConfiguration, timeout: Duration, logger: Logger) async -> [CheckResult] {
        let properties = configuration.consumerProperties
        let security = properties["security.protocol"].map { "security.protocol \($0)" } ?? "plaintext"
        let probe: KafkaClusterProbe
        do {
            probe = try KafkaClusterProbe(properties: properties, logger: logger)
        } catch {
            return [.fail("kafka metadata", "librdkafka refused the configuration: \(error.message)")]
        }
        let metadata: KafkaClusterMetadata
        do {
            metadata = try await probe.metadata(timeout: timeout)
        } catch {
            return [.fail("kafka metadata", "no metadata from \(configuration.brokers) (\(security)): \(error.message)")]
        }
        var results: [CheckResult] = [
            .ok("kafka metadata", "\(metadata.brokers.count) broker(s) answered (\(metadata.brokers.joined(separator: ", "))), \(security)")
        ]
        let pipeline = configuration.pipeline
        for (role, name) in topics(pipeline) {
            let check = "kafka topic \(role)"
            if let partitions = metadata.partitions[name] {
                results.append(.ok(check, "\(name): \(partitions) partition\(partitions == 1 ? "" : "s")"))
            } else if let error = metadata.topicErrors[name] {
                results.append(.fail(check, "\(name): \(error.message)"))
            } else {
                results.append(.fail(check, "\(name) does not exist"))
            }
        }
        if pipeline.urgentTopic == pipeline.jobsTopic {
            results.append(.ok("kafka topic urgent", "\(pipeline.jobsTopic) (the jobs topic: one lane)"))
        }
        var lanes = [(group: configuration.groupId, topic: pipeline.jobsTopic, probe: probe)]
        if let urgent = pipeline.urgentTopic, urgent != pipeline.jobsTopic {
            var urgentProperties = properties
            urgentProperties["group.id"] = configuration.groupId + KafkaMessageSources.urgentGroupSuffix
            do {
                lanes.append((urgentProperties["group.id"]!, urgent, try KafkaClusterProbe(properties: urgentProperties, logger: logger)))
            } catch {
                results.append(.fail("kafka group \(urgentProperties["group.id"]!)", error.message))
            }
        }
        results += await withTaskGroup(of: (Int, CheckResult).self) { tasks in
            for (index, lane) in lanes.enumerated() {
                tasks.addTask {
                    (index, await groupCheck(lane.group, topic: lane.topic, metadata: metadata, probe: lane.probe, timeout: timeout))
                }
            }
            var byLane: [Int: CheckResult] = [:]
            for await (index, result) in tasks { byLane[index] = result }
            return lanes.indices.compactMap { byLane[$0] }
        }
        return results
    }

    static func groupCheck(
        _ group: String, topic: String, metadata: KafkaClusterMetadata, probe: KafkaClusterProbe, timeout: Duration
    ) async -> CheckResult {
        let check = "kafka group \(group)"
        guard let count = metadata.partitions[topic] else { return .fail(check, "offsets not read: \(topic) does not exist") }
        let partitions = (0..<Int32(count)).map { TopicPartition(topic: topic, partition: $0) }
        do {
            let offsets = try await probe.committedOffsets(partitions, timeout: timeout)
            let committed = offsets.values.filter { $0 != nil }.count
            return .ok(
                check,
                committed == 0
                    ? "committed offsets readable on \(topic): none yet"
                    : "committed offsets readable on \(topic): \(committed) of \(count) partitions committed")
        } catch {
            return .fail(check, "committed offsets on \(topic) not readable: \(error.message)")
        }
    }
}
