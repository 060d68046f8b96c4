import PushCore

/// Writes the benchmark's jobs: realistic shapes, a unique binding per job (so dedupe
/// windows never hide a send) and keys spread over many users.
struct BenchJobs: Sendable {
    struct Subscription: Sendable {
        let endpoint: String
        let p256dh: String
        let auth: String
    }

    let runId: String
    let mix: JobMix
    /// The APNs apps (bundle ids) the APNs jobs go to, the `index`-th job to `apnsApps[index % count]`.
    let apnsApps: [String]
    let fcmProject: String
    let webPush: Subscription?
    let users: Int

    func key(_ index: Int) -> [UInt8] { Array("\(runId)-u\(index % users)".utf8) }

    func isOurs(jobId: String) -> Bool { jobId.hasPrefix(runId) && jobId.utf8.dropFirst(runId.utf8.count).first == UInt8(ascii: "-") }

    func isOurs(key: [UInt8]?) -> Bool {
        guard let key else { return false }
        let prefix = runId.utf8
        return key.count > prefix.count && key.starts(with: prefix)
    }

    func value(_ index: Int, createdAt: Int64) -> [UInt8] {
        let id = "\(runId)-\(index)"
        let user = "\(runId)-u\(index % users)"
        let kind = mix.kind(at: index)
        var job = #"{"v":1,"id":"\#(id)","createdAt":\#(createdAt),"userId":"\#(user)","#
        switch kind {
        case .apnsVoip:
            job +=
                #""kind":"call","ttl":30,"priority":"high","data":{"callId":"call-\#(index)","caller":"+4930123456","displayName":"Alice Example"},"#
        default:
            job +=
                #""kind":"message","ttl":3600,"collapseKey":"chat-\#(index % 97)","notification":{"title":"Bob","body":"Are we still on for lunch at noon? I booked the table by the window.","sound":"default","badge":3},"data":{"chatId":"chat-\#(index % 97)","messageId":"m-\#(index)"},"#
        }
        job += #""targets":[\#(target(kind, index))]}"#
        return Array(job.utf8)
    }

    private func target(_ kind: JobMix.Kind, _ index: Int) -> String {
        let binding = "\(runId)-b\(index)"
        switch kind {
        case .apnsVoip:
            return
                #"{"bindingId":"\#(binding)","provider":"apns","app":"\#(apnsApp(index))","token":"\#(apnsToken(index))","environment":"production","pushType":"voip"}"#
        case .apnsAlert:
            return
                #"{"bindingId":"\#(binding)","provider":"apns","app":"\#(apnsApp(index))","token":"\#(apnsToken(index))","environment":"production"}"#
        case .fcm:
            return
                #"{"bindingId":"\#(binding)","provider":"fcm","app":"\#(fcmProject)","token":"bench-\#(runId)-\#(index)","platform":"android"}"#
        case .webpush:
            let subscription = webPush!
            return
                #"{"bindingId":"\#(binding)","provider":"webpush","endpoint":"\#(subscription.endpoint)","keys":{"p256dh":"\#(subscription.p256dh)","auth":"\#(subscription.auth)"}}"#
        case .proxy:
            return #"{"bindingId":"\#(binding)","provider":"proxy","token":"bench-\#(index)","tokenType":"fcm","platform":"android"}"#
        }
    }

    private func apnsApp(_ index: Int) -> String { apnsApps[index % apnsApps.count] }

    /// 64 hex digits, starting `be` so no sandbox error prefix (0410, 0400, …) matches.
    private func apnsToken(_ index: Int) -> String {
        let digits = String(index, radix: 16)
        return "be" + String(repeating: "0", count: 62 - digits.count) + digits
    }

    /// The `number`-th call of the backlog scenario: a VoIP push to an iPhone, id `<run>-call-<n>`.
    func call(_ number: Int, createdAt: Int64) -> (key: [UInt8], value: [UInt8]) {
        let user = "\(runId)-callee\(number)"
        let job =
            #"{"v":1,"id":"\#(runId)-call-\#(number)","createdAt":\#(createdAt),"userId":"\#(user)","kind":"call","ttl":30,"priority":"high","data":{"callId":"call-\#(number)","caller":"+4930123456","displayName":"Alice Example"},"targets":[{"bindingId":"\#(runId)-cb\#(number)","provider":"apns","app":"\#(apnsApps[0])","token":"\#(apnsToken(1_000_000_000 + number))","environment":"production","pushType":"voip"}]}"#
        return (Array(user.utf8), Array(job.utf8))
    }

    static func isCall(jobId: String) -> Bool {
        // Read for every acknowledged outcome, inside the measured window: no copies.
        var jobId = jobId
        return jobId.withUTF8 { bytes in
            let marker: StaticString = "-call-"
            let length = marker.utf8CodeUnitCount
            guard bytes.count >= length else { return false }
            let markerBytes = UnsafeBufferPointer(start: marker.utf8Start, count: length)
            return (0...(bytes.count - length)).contains { start in (0..<length).allSatisfy { bytes[start + $0] == markerBytes[$0] } }
        }
    }
}
