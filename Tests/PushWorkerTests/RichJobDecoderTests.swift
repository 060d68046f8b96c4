import Testing
import TestSupport
@testable import PushCore

@Suite("Job contract v1: notification fields, overrides and Live Activities")
struct RichJobDecoderTests {
    let decoder = JobDecoder()

    func job(notification: String = "{}", extra: String = "") -> String {
        #"{"v":1,"id":"j1","kind":"message","userId":"u","notification":\#(notification)\#(extra),"targets":[{"bindingId":"b","provider":"proxy"}]}"#
    }

    func decode(_ text: String) throws(JobRejection) -> Job {
        try decoder.decode(Array(text.utf8), fallbackCreatedAt: 1_700_000_000_000)
    }

    func rejection(_ text: String) -> String? {
        do {
            _ = try decode(text)
            return nil
        } catch { return error.message }
    }

    @Test("every notification field decodes to its provider-neutral name")
    func everyField() throws {
        let notification = try decode(
            job(
                notification: """
                    {"title":"Bob","subtitle":"Team chat","body":"Hi","sound":{"name":"alarm.caf","critical":true,"volume":0.5},"badge":3,
                     "threadId":"chat-42","category":"MESSAGE_REPLY","interruptionLevel":"time-sensitive","relevanceScore":0.75,
                     "image":"https://example.com/a.png","channelId":"messages","tag":"chat-42","color":"#1a2B3c","icon":"ic_chat",
                     "clickAction":"OPEN_CHAT","locKey":"MSG_FMT","locArgs":["Bob","Hi"],"titleLocKey":"TITLE_FMT","titleLocArgs":["Bob"],
                     "mutableContent":true}
                    """)
        ).notification
        #expect(
            notification
                == Notification(
                    title: "Bob", subtitle: "Team chat", body: "Hi", sound: .init(name: "alarm.caf", isCritical: true, volume: 0.5),
                    badge: 3,
                    threadId: "chat-42", category: "MESSAGE_REPLY", interruptionLevel: .timeSensitive, relevanceScore: 0.75,
                    image: "https://example.com/a.png", channelId: "messages", tag: "chat-42", color: "#1a2B3c", icon: "ic_chat",
                    clickAction: "OPEN_CHAT", locKey: "MSG_FMT", locArgs: ["Bob", "Hi"], titleLocKey: "TITLE_FMT", titleLocArgs: ["Bob"],
                    mutableContent: true))
    }

    @Test("a sound given as a name stays a plain name")
    func soundName() throws {
        #expect(try decode(job(notification: #"{"sound":"ring.caf"}"#)).notification?.sound == "ring.caf")
    }

    @Test("each field refuses a wrong type, enum value, range or length, naming the field")
    func refusals() {
        let cases: [(String, String)] = [
            (#"{"interruptionLevel":"urgent"}"#, "notification.interruptionLevel must be one of passive, active, time-sensitive, critical"),
            (#"{"relevanceScore":1.5}"#, "notification.relevanceScore must be between 0.0 and 1.0"),
            (#"{"relevanceScore":"high"}"#, "notification.relevanceScore must be a number, not string"),
            (#"{"sound":{"critical":true}}"#, "notification.sound.name is required and must be a non-empty string"),
            (#"{"sound":{"name":"a","volume":2}}"#, "notification.sound.volume must be between 0.0 and 1.0"),
            (#"{"sound":{"name":"a","critical":1}}"#, "notification.sound.critical must be true or false, not number"),
            (#"{"sound":{"name":"a","loud":true}}"#, "notification.sound.loud is not a field of the v1 contract"),
            (#"{"color":"red"}"#, "notification.color must be #rrggbb"),
            (##"{"color":"#12345g"}"##, "notification.color must be #rrggbb"),
            (#"{"locArgs":"Bob"}"#, "notification.locArgs must be an array of strings, not string"),
            (#"{"locArgs":["Bob",1]}"#, "notification.locArgs[1] must be a string, not number"),
            (#"{"mutableContent":1}"#, "notification.mutableContent must be true or false, not number"),
            (#"{"threadId":"a\nb"}"#, "notification.threadId contains a control character (CR, LF, tab, …): it can reach an HTTP header"),
            (#"{"channelId":"\#(String(repeating: "c", count: 257))"}"#, "notification.channelId is longer than 256 bytes"),
            (#"{"loudness":3}"#, "notification.loudness is not a field of the v1 contract"),
        ]
        for (notification, reason) in cases {
            #expect(rejection(job(notification: notification)) == reason, "\(notification)")
        }
        let tooMany = "[" + Array(repeating: #""a""#, count: 33).joined(separator: ",") + "]"
        #expect(
            rejection(job(notification: #"{"titleLocArgs":\#(tooMany)}"#)) == "notification.titleLocArgs has 33 entries, the limit is 32")
    }

    @Test("overrides are objects keyed by a linked provider's name")
    func overrides() throws {
        let decoded = try decode(
            job(extra: #","overrides":{"apns":{"payload":{"aps":{"sound":"x"}}},"fcm":{"message":{"android":{"direct_boot_ok":true}}}}"#))
        #expect(decoded.overrides["apns"] == .object([("payload", .object([("aps", .object([("sound", .string("x"))]))]))]))
        #expect(decoded.overrides["fcm"]?["message"]?["android"]?["direct_boot_ok"] == .bool(true))
        #expect(rejection(job(extra: #","overrides":{"pager":{}}"#))?.hasPrefix("overrides.pager is not a provider") == true)
        #expect(rejection(job(extra: #","overrides":{"apns":[]}"#)) == "overrides.apns must be an object, not array")
        #expect(rejection(job(extra: #","overrides":[]"#)) == "overrides must be an object, not array")
    }

    @Test("an override can never change the device token or recipient, nor a header")
    func protectedOverrides() {
        #expect(
            rejection(job(extra: #","overrides":{"fcm":{"message":{"token":"someone-else"}}}"#))
                == "overrides.fcm.message.token cannot be overridden: the message goes to the target's token")
        #expect(
            rejection(job(extra: #","overrides":{"fcm":{"message":{"topic":"all"}}}"#))
                == "overrides.fcm.message.topic cannot be overridden: the message goes to the target's token")
        #expect(
            rejection(job(extra: #","overrides":{"hms":{"message":{"token":["x"]}}}"#))
                == "overrides.hms.message.token cannot be overridden: the message goes to the target's token")
        #expect(
            rejection(job(extra: #","overrides":{"apns":{"headers":{"apns-topic":"other"}}}"#))
                == "overrides.apns.headers is not supported (apns merges payload)")
        #expect(
            rejection(job(extra: #","overrides":{"webpush":{"payload":"x"}}"#)) == "overrides.webpush.payload must be an object, not string"
        )
        #expect(
            rejection(job(extra: #","overrides":{"proxy":{"body":{}}}"#))
                == "overrides.proxy is not supported: proxy payloads take no overrides")
    }

    @Test("liveActivity decodes its event, content state, dates and start attributes")
    func liveActivity() throws {
        let decoded = try decode(
            job(
                extra: """
                    ,"liveActivity":{"event":"start","contentState":{"status":"ringing"},"timestamp":1700000000,"staleDate":1700000600,
                     "dismissalDate":1700003600,"attributesType":"CallAttributes","attributes":{"caller":"Bob"}}
                    """))
        #expect(
            decoded.liveActivity
                == LiveActivity(
                    event: .start, contentState: .object([("status", .string("ringing"))]),
                    timestamp: 1_700_000_000, staleDate: 1_700_000_600, dismissalDate: 1_700_003_600,
                    attributesType: "CallAttributes", attributes: .object([("caller", .string("Bob"))])))
    }

    @Test("liveActivity refuses an unknown event, a missing content state, a start without attributes and hostile dates")
    func liveActivityRefusals() {
        #expect(
            rejection(job(extra: #","liveActivity":{"event":"pause","contentState":{}}"#))
                == "liveActivity.event must be one of start, update, end")
        #expect(
            rejection(job(extra: #","liveActivity":{"event":"update"}"#))
                == "liveActivity.contentState is required: the activity's content as an object")
        #expect(
            rejection(job(extra: #","liveActivity":{"event":"start","contentState":{}}"#))
                == "liveActivity.a start event needs attributesType and attributes")
        #expect(
            rejection(job(extra: #","liveActivity":{"event":"end","contentState":{},"timestamp":99999999999999}"#))
                == "liveActivity.timestamp must be between 0 and 253402300799")
        #expect(
            rejection(job(extra: #","liveActivity":{"event":"end","contentState":{},"staleDate":-1}"#))
                == "liveActivity.staleDate must be between 0 and 253402300799")
    }
}
