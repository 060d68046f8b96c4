import PushCore
import Testing
@testable import PushCrypto

@Suite("RFC 8291 Web Push encryption")
struct WebPushEncryptionTests {
    // RFC 8291 Section 5 and Appendix A.
    static let plaintext = Array("When I grow up, I want to be a watermelon".utf8)
    static let asPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
    static let asPublic = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let uaPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
    static let uaPublic = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let salt = "DGv6ra1nlYgDCS1FRnbzlw"
    static let authSecret = "BTBZMqHH6r4Tts7J_aSIgg"
    static let body =
        "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"

    func decode(_ text: String) throws -> [UInt8] { try #require(Base64URL.decode(text)) }

    @Test("the Appendix A intermediate values: ECDH secret, CEK and nonce")
    func intermediateValues() throws {
        let sender = try PrivateKey.p256(rawPrivateKey: decode(Self.asPrivate))
        #expect(try sender.rawPublicKey() == decode(Self.asPublic))
        let secret = try sender.sharedSecret(withPeer: decode(Self.uaPublic))
        #expect(Base64URL.encode(secret) == "kyrL1jIIOHEzg3sM2ZWRHDRB62YACZhhSlknJ672kSs")
        let keys = WebPushEncryption.keys(
            ecdhSecret: secret, authSecret: try decode(Self.authSecret), uaPublic: try decode(Self.uaPublic),
            asPublic: try decode(Self.asPublic), salt: try decode(Self.salt))
        #expect(Base64URL.encode(keys.contentEncryptionKey) == "oIhVW04MRdy2XN9CiKLxTg")
        #expect(Base64URL.encode(keys.nonce).hasPrefix("4h_95klXJ5E"))
    }

    @Test("the RFC's example message is reproduced byte for byte from its fixed keys and salt")
    func rfcExample() throws {
        let body = try WebPushEncryption.encrypt(
            Self.plaintext, uaPublic: decode(Self.uaPublic), authSecret: decode(Self.authSecret),
            senderKey: PrivateKey.p256(rawPrivateKey: decode(Self.asPrivate)), salt: decode(Self.salt))
        #expect(Base64URL.encode(body) == Self.body)
    }

    @Test("the user agent's key decrypts the RFC example and our own fresh-key messages")
    func roundTrip() throws {
        let ua = try PrivateKey.p256(rawPrivateKey: decode(Self.uaPrivate))
        #expect(try WebPushEncryption.decrypt(decode(Self.body), uaKey: ua, authSecret: decode(Self.authSecret)) == Self.plaintext)
        let subscriber = try PrivateKey.generateP256()
        let auth = try RandomBytes.generate(16)
        let message = Array(#"{"title":"Bob","body":"Lunch?"}"#.utf8)
        let first = try WebPushEncryption.encrypt(message, uaPublic: subscriber.rawPublicKey(), authSecret: auth)
        let second = try WebPushEncryption.encrypt(message, uaPublic: subscriber.rawPublicKey(), authSecret: auth)
        #expect(first != second, "a fresh sender key and salt per message")
        #expect(try WebPushEncryption.decrypt(first, uaKey: subscriber, authSecret: auth) == message)
        var tampered = first
        tampered[tampered.count - 1] ^= 1
        #expect(throws: CryptoError.self) { try WebPushEncryption.decrypt(tampered, uaKey: subscriber, authSecret: auth) }
    }

    @Test("a p256dh that is not a point on the curve is refused")
    func badPeerKey() throws {
        var point = try decode(Self.uaPublic)
        point[40] ^= 0xFF
        #expect(throws: CryptoError.self) { try PrivateKey.generateP256().sharedSecret(withPeer: point) }
        #expect(throws: CryptoError.self) {
            try WebPushEncryption.encrypt(Self.plaintext, uaPublic: point, authSecret: decode(Self.authSecret))
        }
    }

    @Test("a fresh sender key agrees on the secret the subscriber's key derives with it")
    func ephemeralAgreement() throws {
        let subscriber = try PrivateKey.generateP256()
        let agreement = try WebPushEncryption.KeyAgreement.ephemeral(withPeer: subscriber.rawPublicKey())
        #expect(agreement.senderPublic.count == 65 && agreement.senderPublic[0] == 0x04)
        #expect(try subscriber.sharedSecret(withPeer: agreement.senderPublic) == agreement.secret)
    }
}

@Suite("HMAC-SHA-256 (RFC 4231 test vectors)")
struct HMACSHA256Tests {
    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String($0, radix: 16).leftPadded(to: 2) }.joined() }

    @Test("test case 1: a 20-byte key")
    func shortKey() {
        let mac = HMACSHA256.authenticate(Array("Hi There".utf8), key: [UInt8](repeating: 0x0b, count: 20))
        #expect(Self.hex(mac) == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
    }

    @Test("test case 2: a key shorter than the output")
    func keyShorterThanOutput() {
        let mac = HMACSHA256.authenticate(Array("what do ya want for nothing?".utf8), key: Array("Jefe".utf8))
        #expect(Self.hex(mac) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test("test case 6: a 131-byte key, longer than the block, is hashed first")
    func keyLongerThanBlock() {
        let mac = HMACSHA256.authenticate(
            Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8), key: [UInt8](repeating: 0xaa, count: 131))
        #expect(Self.hex(mac) == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
