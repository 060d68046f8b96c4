import Testing
import TestSupport
@testable import PushCore

@Suite("Fields that can reach an HTTP header or URL carry no control characters")
struct HeaderSafetyTests {
    static func job(
        collapseKey: String = "c", target: String = #"{"bindingId":"b1","provider":"proxy"}"#,
        notificationBody: String = "hi"
    ) -> String {
        #"{"v":1,"id":"j1","kind":"message","userId":"u","collapseKey":"\#(collapseKey)","notification":{"body":"\#(notificationBody)"},"targets":[\#(target)]}"#
    }

    static func rejection(_ text: String) -> JobRejection? {
        do {
            _ = try JobDecoder().decode(Array(text.utf8), fallbackCreatedAt: 0)
            return nil
        } catch { return error }
    }

    @Test("a CR/LF collapseKey is refused at decode with invalid_field naming the field, its value not echoed")
    func collapseKeyInjection() throws {
        let rejection = try #require(Self.rejection(Self.job(collapseKey: #"x\r\napns-push-type: voip"#)))
        #expect(rejection.code == .invalidField)
        #expect(rejection.message.hasPrefix("collapseKey contains a control character"))
        #expect(!rejection.message.contains("apns-push-type"))
    }

    @Test(
        "control characters are refused in every identifier, token, key and endpoint",
        arguments: [
            #"{"bindingId":"b\n1","provider":"proxy"}"#,
            #"{"bindingId":"b1","provider":"apns","app":"com.example\r\nx","token":"abababababababababababababababab"}"#,
            #"{"bindingId":"b1","provider":"fcm","token":"tok\u000bx"}"#,
            #"{"bindingId":"b1","provider":"proxy","token":"t\u007f","tokenType":"fcm"}"#,
            #"{"bindingId":"b1","provider":"webpush","endpoint":"https://push.example/x\r\nHost: evil","keys":{"p256dh":"a","auth":"b"}}"#,
            #"{"bindingId":"b1","provider":"webpush","endpoint":"https://push.example/x","keys":{"p256dh":"a\tb","auth":"b"}}"#,
            #"{"bindingId":"b1","xmpush":"a:com.voip.phone:tok\r\nen"}"#,
        ])
    func targetFields(_ target: String) throws {
        let rejection = try #require(Self.rejection(Self.job(target: target)))
        #expect(rejection.code == .invalidField)
        #expect(rejection.message.contains("control character"))
    }

    @Test("notification text may carry line breaks: it is shown to the user and always JSON-escaped")
    func textKeepsLineBreaks() throws {
        let job = try JobDecoder().decode(Array(Self.job(notificationBody: #"line one\nline two"#).utf8), fallbackCreatedAt: 0)
        #expect(job.notification?.body == "line one\nline two")
    }

    @Test("a malformed RFC 8599 parameter is refused without repeating the binding text (it may be the token)")
    func bindingErrorsDoNotEchoTokens() throws {
        let rejection = try #require(Self.rejection(Self.job(target: #"{"bindingId":"b1","rfc8599":"pn-provider=fcm;secret-token-123"}"#)))
        #expect(rejection.code == .invalidField)
        #expect(!rejection.message.contains("secret-token-123"))
    }

    @Test("secrets are shortened for logs and command output")
    func redaction() {
        #expect(Redaction.token("abababababababababababababababab") == "ababab…abab")
        #expect(Redaction.token("short") == "…")
        #expect(
            Redaction.url("https://fcm.googleapis.com/fcm/send/cXf3:APA91bH-secret-part-1234") == "https://fcm.googleapis.com/fcm/s…1234")
        #expect(Redaction.url("https://push.example/x") == "https://push.example/…")
    }
}
