import Testing
@testable import PushTemplates

@Suite("Mizu message files imported as templates")
struct MizuMessageFilesTests {
    @Test(
        "bare keywords become tags, longest first and whole words only; text after --EOF-- is cut; a relative apns-expiration becomes APNSEXPIRATION"
    )
    func conversion() {
        let text = """
            {"message": {"token": "TOKEN", "android": {"ttl": "TTLNUMs", "notification": {"notification_priority": "NPRIORITY", "x": "PRIORITY_MAX"}},
             "apns": {"headers": {"apns-expiration": "TTLNUM", "apns-topic": "PACKAGE.voip"}}, "data": {"ntouser": "TOUSERNAME", "ntype": "TYPE", "t": "TOTAL {{TO}}"}}}
            --EOF—
            TOKEN here is a note
            """
        let conversion = MizuMessageFiles.convert(text)
        #expect(
            conversion.template == """
                {"message": {"token": "{{TOKEN}}", "android": {"ttl": "{{TTLNUM}}s", "notification": {"notification_priority": "{{NPRIORITY}}", "x": "PRIORITY_MAX"}},
                 "apns": {"headers": {"apns-expiration": "{{APNSEXPIRATION}}", "apns-topic": "{{PACKAGE}}.voip"}}, "data": {"ntouser": "{{TOUSERNAME}}", "ntype": "{{TYPE}}", "t": "TOTAL {{TO}}"}}}

                """)
        #expect(conversion.changes.count == 3)
        #expect(conversion.changes[0].contains("--EOF--"))
        #expect(conversion.changes[1] == "keywords marked: NPRIORITY ×1, PACKAGE ×1, TOKEN ×1, TOUSERNAME ×1, TTLNUM ×2, TYPE ×1")
    }
}
