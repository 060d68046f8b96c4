import PushCore
import PushCrypto
import PushPluginAPI

/// Builds the HTTP/2 request for one delivery: path, Apple's headers, payload.
enum APNsRequest {
    struct Built {
        var path: String
        var headers: [(name: String, value: String)]
        var payload: [UInt8]
        var pushType: APNsPushType
        /// The alert was shortened to fit the payload limit.
        var truncated: Bool
    }

    enum Refusal: Error, Equatable {
        case payloadTooLarge(size: Int, limit: Int)
        /// The push type is served over token-based connections only (`APNsPushType.needsTokenAuthentication`).
        case needsTokenAuthentication(APNsPushType)
        case template(PayloadTemplateFailure)
        case destination(APNsDestination.Refusal)
        /// A `liveactivity` target of a job without `liveActivity`: there is nothing to start, update or end.
        case liveActivityMissing
        /// ActivityKit: a push that starts a Live Activity must include an `alert`; the job's notification has no text.
        case liveActivityStartWithoutAlert
    }

    static func build(_ delivery: Delivery, app: APNsApp, templates: any PayloadTemplates = BuiltInPayloads()) throws(Refusal) -> Built {
        let job = delivery.job
        let destination: APNsDestination
        do { destination = try APNsDestination.resolve(delivery, app: app) } catch { throw .destination(error) }
        let pushType = destination.pushType
        if pushType.needsTokenAuthentication, case .certificate = app.authentication(for: pushType) {
            throw .needsTokenAuthentication(pushType)
        }
        func keywords() -> PayloadKeywords {
            var keywords = PayloadKeywords(delivery: delivery, app: app.bundleId)
            keywords.set("TOKEN", destination.token)
            keywords.set("PUSHTYPE", pushType.rawValue)
            keywords.set("APRIORITY", String(pushType.priority(for: job.priority)))
            return keywords
        }
        // The job's `overrides.apns.payload`, merged last; headers are never overridden.
        let override = job.overrides[.apns]?["payload"]
        let limit = pushType.payloadLimit
        let payload: [UInt8]
        var truncated = false
        switch templates.render(PayloadTemplateKey(provider: .apns, app: app.bundleId, kind: job.kind), keywords: keywords()) {
        case nil:
            if pushType == .liveactivity {
                guard let activity = job.liveActivity else { throw .liveActivityMissing }
                if activity.event == .start, !(job.notification.map(APNsLiveActivity.hasAlertText) ?? false) {
                    throw .liveActivityStartWithoutAlert
                }
            }
            switch AlertFitting.fit(
                job.notification, limit: limit, override: override,
                build: {
                    self.payload(job, notification: $0, pushType: pushType)
                })
            {
            case .success(let fitted): (payload, truncated) = (fitted.payload, fitted.truncated)
            case .failure(let tooLarge): throw .payloadTooLarge(size: tooLarge.size, limit: limit)
            }
        // Mizu's pushkitmessage.txt carries a `headers` block; headers follow the binding rules instead.
        case .success(let rendered)?: payload = PayloadOverride.apply(override, to: rendered.bytes(removing: ["headers"]))
        case .failure(let failure)?: throw .template(failure)
        }
        guard payload.count <= limit else { throw .payloadTooLarge(size: payload.count, limit: limit) }
        // Room for `apns-collapse-id` and the provider's `authorization` too: growing an array of tuples copies each
        // through the runtime's generic tuple copy.
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(8)
        headers.append(("apns-topic", (app.topicOverride ?? app.bundleId) + pushType.topicSuffix))
        headers.append(("apns-push-type", pushType.rawValue))
        let serviceUpdate = pushType == .pushtotalk && isPushToTalkServiceUpdate(payload)
        headers.append(("apns-priority", String(pushType.priority(for: job.priority, serviceUpdate: serviceUpdate))))
        headers.append(("apns-expiration", String(pushType.expiresAtOnce ? 0 : expiration(job))))
        headers.append(("apns-id", stableId(delivery.deliveryKey)))
        headers.append(("content-type", "application/json"))
        if let collapseKey = job.collapseKey { headers.append(("apns-collapse-id", collapseId(collapseKey))) }
        return Built(
            path: "/3/device/\(destination.token)", headers: headers, payload: payload,
            pushType: pushType, truncated: truncated)
    }

    /// A Push to Talk payload that updates the service rather than carrying a transmission: `aps.ptt-push-type` is
    /// `service-update` (what the device reads to call `incomingServiceUpdatePush`; Apple's developer forum thread
    /// 787878). The job sets it with `overrides.apns.payload` or a template.
    static func isPushToTalkServiceUpdate(_ payload: [UInt8]) -> Bool {
        (try? JSONParser.parse(payload))?["aps"]?["ptt-push-type"] == .string("service-update")
    }

    /// Seconds since the epoch after which APNs stops trying; 0 = deliver now or never.
    static func expiration(_ job: Job) -> Int64 {
        job.deadline.isNowOrNever ? 0 : job.deadline.expiresAt / 1000
    }

    /// `apns-collapse-id` may hold 64 bytes; longer keys are hashed (`AppleCollapseId`, shared with FCM's `apns` block).
    static func collapseId(_ key: String) -> String { AppleCollapseId.header(for: key) }

    /// A UUID derived from the (job, binding) pair, so every attempt of one delivery carries the same `apns-id`.
    static func stableId(_ key: String) -> String {
        var bytes = Digest.sha256(Array(key.utf8))
        bytes[6] = bytes[6] & 0x0F | 0x50
        bytes[8] = bytes[8] & 0x3F | 0x80
        return String(unsafeUninitializedCapacity: 36) { text in
            var written = 0
            for index in 0..<16 {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    text[written] = UInt8(ascii: "-")
                    written += 1
                }
                text[written] = hexDigits[Int(bytes[index] >> 4)]
                text[written + 1] = hexDigits[Int(bytes[index] & 0x0F)]
                written += 2
            }
            return written
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// `aps` plus the job's data at the top level. Background pushes carry `content-available`
    /// only (no alert, sound or badge, as Apple requires), widget and control pushes `content-changed`
    /// only; alerts with data get `mutable-content` unless the job says otherwise, so a notification service extension can enrich them.
    static func payload(_ job: Job, notification: Notification?, pushType: APNsPushType) -> [UInt8] {
        var writer = JSONWriter(capacity: 256)
        writer.beginObject()
        writer.key("aps")
        writer.beginObject()
        if pushType == .background {
            writer.member("content-available", Int64(1))
        } else if pushType == .widgets || pushType == .controls {
            // WidgetKit, "Updating widgets with WidgetKit push notifications": `aps` is `{"content-changed": true}`.
            writer.member("content-changed", true)
        } else if pushType == .liveactivity, let activity = job.liveActivity {
            APNsLiveActivity.write(activity, notification: notification, createdAt: job.createdAt, into: &writer)
        } else if let notification {
            AppleNotificationMembers.write(notification, into: &writer, mutableByDefault: pushType == .alert && !job.data.isEmpty)
        }
        writer.endObject()
        for (key, value) in job.data.sorted(by: { $0.key < $1.key }) where key != "aps" {
            writer.member(key, value)
        }
        writer.endObject()
        return writer.bytes
    }
}
