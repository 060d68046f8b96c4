import Logging
import PushCore
import PushPipeline
import TestSupport
import Testing
@testable import PushBench

@Suite("push-worker-dev bench")
struct BenchTests {
    @Test("--mix takes kind=weight lists and refuses unknown kinds, bad weights and empty mixes")
    func mixParsing() throws {
        let mix = try JobMix(parsing: "apns-voip=1, apns-alert=3,webpush")
        #expect(mix.description == "apns-voip=1,apns-alert=3,webpush=1")
        #expect(throws: BenchError.self) { try JobMix(parsing: "pager=1") }
        #expect(throws: BenchError.self) { try JobMix(parsing: "fcm=-1") }
        #expect(throws: BenchError.self) { try JobMix(parsing: "fcm=0") }
    }

    @Test("the mix interleaves kinds in proportion to their weights")
    func mixProportions() throws {
        let mix = try JobMix(parsing: "apns-voip=1,apns-alert=3,fcm=6")
        let kinds = (0..<1000).map(mix.kind(at:))
        #expect(kinds.filter { $0 == .apnsVoip }.count == 100)
        #expect(kinds.filter { $0 == .apnsAlert }.count == 300)
        #expect(kinds.filter { $0 == .fcm }.count == 600)
    }

    @Test("every generated job passes the production decoder, with one binding of its own")
    func jobsDecode() throws {
        let jobs = BenchJobs(
            runId: "rtest", mix: JobMix.default, apnsApps: ["com.example.chat"], fcmProject: "p",
            webPush: .init(
                endpoint: "https://push.example.net/wp/1",
                p256dh: "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM",
                auth: "tBHItJI5svbpez7KI4CCXg"),
            users: 10)
        var bindings = Set<String>()
        for index in 0..<200 {
            let job = try JobDecoder().decode(jobs.value(index, createdAt: 1_795_310_000_000), fallbackCreatedAt: 0)
            #expect(job.targets.count == 1)
            bindings.insert(job.targets[0].bindingId)
            #expect(jobs.isOurs(jobId: job.id))
            #expect(jobs.isOurs(key: jobs.key(index)))
        }
        #expect(bindings.count == 200, "a repeated binding would let dedupe windows hide sends")
        #expect(!jobs.isOurs(jobId: "rtest2-1"), "another run's ids are not ours")
    }

    @Test("the recorder counts this run's final outcomes only; retrying is not final")
    func recorderCountsFinalOutcomes() {
        let jobs = BenchJobs(runId: "rtest", mix: JobMix.default, apnsApps: ["a"], fcmProject: "p", webPush: nil, users: 10)
        let recorder = BenchRecorder(jobs: jobs)
        func outcome(_ job: String, _ status: Outcome.Status) -> Publication {
            .outcome(Outcome(jobId: job, userId: "u", bindingId: "b", provider: .apns, app: nil, status: status, attempts: 1, at: 0))
        }
        let timeline = JobTimeline(started: .now, processed: .now)
        recorder.acknowledged([outcome("rtest-1", .delivered)], timeline: timeline, kafkaTimestamp: currentTimeMilliseconds())
        recorder.acknowledged([outcome("rtest-2", .retrying)], timeline: timeline, kafkaTimestamp: nil)
        recorder.acknowledged([outcome("rtest-2", .failed)], timeline: nil, kafkaTimestamp: nil)
        recorder.acknowledged([outcome("other-3", .delivered)], timeline: timeline, kafkaTimestamp: nil)
        let snapshot = recorder.snapshot
        #expect(snapshot.finished == 2)
        #expect(snapshot.statuses == ["delivered": 1, "retrying": 1, "failed": 1])
        #expect(snapshot.pipelineLatency.totalCount == 2, "retried outcomes have no consume time")
    }

    @Test("a job's latency is split at the moment its targets were done: processing before, publishing after")
    func recorderSplitsLatency() {
        let jobs = BenchJobs(runId: "rsplit", mix: JobMix.default, apnsApps: ["a"], fcmProject: "p", webPush: nil, users: 10)
        let recorder = BenchRecorder(jobs: jobs)
        let started = ContinuousClock.now - .milliseconds(10)
        let outcome = Outcome(
            jobId: "rsplit-1", userId: "u", bindingId: "b", provider: .apns, app: nil, status: .delivered, attempts: 1, at: 0)
        recorder.acknowledged(
            [.outcome(outcome)], timeline: JobTimeline(started: started, processed: started + .milliseconds(3)),
            kafkaTimestamp: nil)
        let snapshot = recorder.snapshot
        #expect((2_990...3_010).contains(snapshot.processingLatency.valueAtPercentile(50)))
        #expect(snapshot.publishingLatency.valueAtPercentile(50) >= 6_990)
        #expect(snapshot.pipelineLatency.valueAtPercentile(50) >= 9_990)
    }

    @Test("a run through Kafka, the pipeline and every provider sandbox finishes all jobs, delivered")
    func endToEndAgainstSandboxes() async throws {
        var options = EndToEndBench.Options()
        options.jobs = 400
        // Without calls: their 30 s TTL can run out when the whole test suite holds the CPU, and an expired call is not delivered.
        options.mix = try JobMix(parsing: "apns-alert=40,fcm=25,webpush=5,proxy=10")
        options.timeout = .seconds(120)
        var logger = Logger(label: "bench-test")
        logger.logLevel = .error
        let report = try await EndToEndBench.run(options, logger: logger) { _ in }
        #expect(report.complete)
        #expect(report.outcomes == ["delivered": 400])
        #expect(report.jobsPerSecond > 0)
        #expect(report.pipelineLatencyMs.max >= report.pipelineLatencyMs.p50)
        #expect(report.peakResidentMB > 0)
        #expect(report.table().contains("400 of 400 finished"))
    }

    @Test("the tenants scenario delivers every job over apps of different teams, each signed with its own key, and again over one app")
    func tenantsAgainstSandbox() async throws {
        var options = TenantsBench.Options()
        options.apps = 5
        options.jobsPerApp = 2
        options.base.timeout = .seconds(120)
        var logger = Logger(label: "bench-test")
        logger.logLevel = .error
        let report = try await TenantsBench.run(options, logger: logger) { _ in }
        #expect(report.tenants.apps == 5)
        #expect(report.tenants.outcomes == ["delivered": 10], "the sandbox accepts a token only if signed by the key of the team it names")
        #expect(report.single.apps == 1)
        #expect(report.single.outcomes == ["delivered": 10])
        #expect((report.tenants.connections?.atEnd ?? 0) >= 1, "the worker's connections to the APNs sandbox are counted")
        #expect(report.cpuPerJobRatio > 0)
        #expect(report.table().contains("10 of 10"))
    }
}
