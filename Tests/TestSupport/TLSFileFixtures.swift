import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// PKCS#12 bundles (an EC P-256 key and its self-signed certificate, valid until 2126) that parse, one per password,
/// for configurations that now open a `.p12` when they read it. Made with `openssl pkcs12 -export -keypbe AES-256-CBC
/// -certpbe AES-256-CBC -macalg sha256 -passout pass:<password>`.
public enum TestPKCS12 {
    private static let bundles = [
        "secret": """
        MIIEPAIBAzCCA/IGCSqGSIb3DQEHAaCCA+MEggPfMIID2zCCApIGCSqGSIb3DQEHBqCCAoMwggJ/AgEAMIICeAYJKoZIhvcNAQcB
        MFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAjs1Ap+fiNnDwICCAAwDAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEHHc
        uaj27ALURWNGMMrVOfqAggIQfE0ipByy/CZbgB1lvOteJh37IJ1c/Fe4yj2hKa5vyyDcaPHFL/1pzeXi01jz3scnCLfP22x+p7PV
        SilDrPsBo1tw4XUqXmFor6vGh8ZKD8jY3ktyZggNqkXR6qm4yZJSNDCvt2lVu8qspjeH4sbVrNtzY9enr8Juje+hGhZnCbJu1nXK
        mTYXFkemQWtT+ECN3LoOCnABnSexvB+uPjUVjXYs6+LJLAb8lxfsOoBvgVQ+m+E9aPkySm5Yv6c11Vd/fCqMi5OMaajTcCIShBjo
        cmqU0VTtKF8tg4Uty0zMdMJfUD7tuqz/7Fu4YTIk4tltkSyY+T1NPc9OIpONos+F3c/mWseakkMJJKKS4JoahazKQT5DVgKenR/F
        dFLQg+ZTgzRWkeezoNMZnY7vltlnM2eFGnPldqMZ7z9DFwv7W6mJgfafBQbAcur4CuF0InP3/Z4dx8tG0cqZog5SPvclJUnTTu/7
        R42s2UhV1wfZxhlWlMa+KbWipd+EZHcCY/X5fTQwIxRIw4vZswIFl8mNbDlvdLtImK/stg7CDzH4PjwhOPA6R+fuFl6GpvL9SqmE
        3dSKHHWMjIXbvyAw/Xz6VOUa+A9WJ/WWUzUJmnc93x/Bsnf3aBt9fzOmriBU4JKlyYYzhA/pme2GsW+3WF4bz+Y29TXFlagkTD51
        g/2wEV6CpD/CduPyoPCDTttRoO51MIIBQQYJKoZIhvcNAQcBoIIBMgSCAS4wggEqMIIBJgYLKoZIhvcNAQwKAQKgge8wgewwVwYJ
        KoZIhvcNAQUNMEowKQYJKoZIhvcNAQUMMBwECKXFtWV92CEgAgIIADAMBggqhkiG9w0CCQUAMB0GCWCGSAFlAwQBKgQQ1E56F7Rs
        qI2E7kz5M2roVASBkCKMx/M00gbAf/z6wDk8mVKmAi6gfWURlcHXNRMMXKvADnVGSxD50xpHHNlfw/5QreHAeb8pWGCZ8TBDi+OD
        M95ev/vx13ijzkGbDaV5g1JCmrZ+7jbmShcLRj9ehn95spJ89aQOikXXRfqZYmvfXA/LkecGnypW4FtqhQggp3oFxS2lvyMXa01i
        3yICqqbEejElMCMGCSqGSIb3DQEJFTEWBBQSXZVKrAjcAQJcVSZRzBQcZiHQfzBBMDEwDQYJYIZIAWUDBAIBBQAEIFYLuB68wlGq
        zWSZWIXlKl/asm0dX0D6x1I12R6qWEmsBAhnlEe5RvVoNAICCAA=
        """,
        "s3cret": """
        MIIEPAIBAzCCA/IGCSqGSIb3DQEHAaCCA+MEggPfMIID2zCCApIGCSqGSIb3DQEHBqCCAoMwggJ/AgEAMIICeAYJKoZIhvcNAQcB
        MFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAj8YhHsEs2aLwICCAAwDAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEK/G
        i0WTcNxQ1W76BjdhUTGAggIQ6C6oI4TZJK6gPrhkzvqoFkpd3pm8+WEyDkshvUQo78n878bUbt18xw48A0CAyPxRgUcCPIts+j6b
        0w3hviLAlAT6LKbb6fIeXVwLjqrPzTfmzekGylmS7lXTpxSTEn6pikyL6osG4C058wg+8sS7RoPQanP3/MG0gXD8uUkd8FSN0YvJ
        q0AqFEQcv3XiKaEuCRB4q0MGgHOM0xDgil8YnHzb7ThwAp5VtHn7iYPvwOJ+2RwHmxUjd3sHL0M/TtmPYFBu+L15NnwOMH/1V3mo
        0pSJYPtJNrqh3yLpD93fbGkefjyn+cpKr5VGAdn+AV8TaDlNBzJezSdQHgWLdja+g3uhLSFWps2Q6oeglcDCevqL2ARLizoM+deV
        /SKWZcNMUKEE7Zw/LhgOEOyKy4akB7S5AcUDH9GwCi3xqdbkCGBuBNeyBbP+nJsYn/0giLqVbMK8NNIYWA8QWiqvEcvarBjXI4cd
        TpRdAFmJQBsVKVgsV+NObME6tiNlMPvLUzMGFjlcxqv374ayAMJnWTlFTiPUmQS7I/L34pSK9KLX1iR6o6LqXH2BTPVXZNqYmBbP
        a68LvBqWcN3xmUSGumTgfXdzNBSaSyfWA5tflGYLkP9eXhM/w6vbaBqabl3102CGyTqMbg+CiN5EUSefP0emo5zVgg6dB8Dmd3Ym
        S3V442HPnrrN7W22UtpwJRs3cmiMMIIBQQYJKoZIhvcNAQcBoIIBMgSCAS4wggEqMIIBJgYLKoZIhvcNAQwKAQKgge8wgewwVwYJ
        KoZIhvcNAQUNMEowKQYJKoZIhvcNAQUMMBwECOJ9DtnbdbmlAgIIADAMBggqhkiG9w0CCQUAMB0GCWCGSAFlAwQBKgQQ/v4Fe1w+
        l65oNSADn1wnqQSBkGWuFD4XN6JSqJeqPq/bBlkRlXX/4p/DhYi1+WvWayh75H/fyBX7PL/4YIlDjpsd4fg4YwWONvajxIgVDGvZ
        UiQ1cWOwnJOiFfszCK7DY+FKTmUnZpntvPoCGN5Zva+lkrafOGo54g7wdBwK3aQje27uGmlzxbwRNH20BmS8DJVmV8UO5l4NB9jd
        oxgGonYKNTElMCMGCSqGSIb3DQEJFTEWBBS4qXMY73F40yfNn69fSqp2bX4CjzBBMDEwDQYJYIZIAWUDBAIBBQAEIO9QRS7/2SPw
        qaWZ6JZoApo0+BTvZgAzLJcbXNbUfuc6BAg9okwggxg5qgICCAA=
        """,
    ]

    /// The bundle that opens with `password` (`secret` or `s3cret`).
    public static func bytes(password: String) -> Data {
        guard let base64 = bundles[password], let data = Data(base64Encoded: base64, options: .ignoreUnknownCharacters) else {
            fatalError("no PKCS#12 fixture for this password")
        }
        return data
    }
}

/// Runs `body` while a FIFO at `fifo` might block it, so a test of "a FIFO is refused" fails instead of hanging when
/// the code under test opens the FIFO and waits for a writer: if `body` has not returned after `patience`, the hang is
/// recorded as an issue and the FIFO is opened for writing and closed again and again until `body` returns, each time
/// giving the blocked reader an end of file. A watchdog, not a timing assertion: `patience` matters only when `body` blocks.
public func withFIFOWatchdog<T: Sendable>(
    unblocking fifo: String, patience: Duration = .seconds(60), sourceLocation: SourceLocation = #_sourceLocation,
    _ body: @Sendable () async throws -> T
) async rethrows -> T {
    let finished = Mutex(false)
    let watchdog = Task.detached {
        try await Task.sleep(for: patience)
        guard !finished.withLock({ $0 }) else { return }
        Issue.record("blocked on the FIFO \(fifo) for \(patience)", sourceLocation: sourceLocation)
        while !finished.withLock({ $0 }) {
            let descriptor = open(fifo, O_WRONLY | O_NONBLOCK)
            if descriptor >= 0 { close(descriptor) }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
    defer {
        finished.withLock { $0 = true }
        watchdog.cancel()
    }
    return try await body()
}

/// Makes a FIFO at `path`.
public func makeFIFO(at path: String) throws {
    guard mkfifo(path, 0o600) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
}
