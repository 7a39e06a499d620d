-- A store written by grader 0.11.0 (schema 0006): tests/course_content.py's course, dumped with sqlite3's iterdump.
BEGIN TRANSACTION;
CREATE TABLE adjustments (
	id INTEGER NOT NULL, 
	submission_id INTEGER NOT NULL, 
	points FLOAT NOT NULL, 
	comment TEXT NOT NULL, 
	made_by TEXT NOT NULL, 
	made_at TEXT NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(submission_id) REFERENCES submissions (id)
);
INSERT INTO "adjustments" VALUES(1,1,1.5,'a fine explanation in the docstring','instructor','2026-12-07T12:00:28+00:00');
INSERT INTO "adjustments" VALUES(2,1,0.5,'second look','instructor','2026-12-07T12:00:28+00:00');
CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);
INSERT INTO "alembic_version" VALUES('0006');
CREATE TABLE exercise_terms (
	id INTEGER NOT NULL, 
	exercise VARCHAR(64) NOT NULL, 
	"key" VARCHAR(32) NOT NULL, 
	value TEXT NOT NULL, 
	changed_by TEXT NOT NULL, 
	changed_at TEXT NOT NULL, 
	PRIMARY KEY (id)
);
INSERT INTO "exercise_terms" VALUES(1,'continuous_batching','due','"2026-12-20T23:59:00+00:00"','instructor','2026-12-07T12:00:28+00:00');
CREATE TABLE extensions (
	student_id VARCHAR(64) NOT NULL, 
	exercise VARCHAR(64) NOT NULL, 
	due TEXT NOT NULL, 
	granted_at TEXT NOT NULL, 
	PRIMARY KEY (student_id, exercise), 
	FOREIGN KEY(student_id) REFERENCES students (id)
);
INSERT INTO "extensions" VALUES('bob','continuous_batching','2026-12-24T23:59:00+00:00','2026-12-07T12:00:28+00:00');
CREATE TABLE links (
	id INTEGER NOT NULL, 
	token_sha256 VARCHAR(64) NOT NULL, 
	role VARCHAR(16) NOT NULL, 
	student_id VARCHAR(64), 
	one_time BOOLEAN NOT NULL, 
	created_at TEXT NOT NULL, 
	used_at TEXT, 
	revoked_at TEXT, 
	PRIMARY KEY (id), 
	UNIQUE (token_sha256), 
	FOREIGN KEY(student_id) REFERENCES students (id)
);
CREATE TABLE lti_contexts (
	platform_id INTEGER NOT NULL, 
	context_id VARCHAR(255) NOT NULL, 
	title TEXT DEFAULT '' NOT NULL, 
	memberships_url TEXT, 
	updated_at TEXT NOT NULL, 
	PRIMARY KEY (platform_id, context_id), 
	FOREIGN KEY(platform_id) REFERENCES lti_platforms (id)
);
INSERT INTO "lti_contexts" VALUES(1,'course-7','Systems 101','https://canvas.example.edu/nrps','2026-12-01T10:00:00+00:00');
CREATE TABLE lti_deployments (
	platform_id INTEGER NOT NULL, 
	deployment_id VARCHAR(255) NOT NULL, 
	PRIMARY KEY (platform_id, deployment_id), 
	FOREIGN KEY(platform_id) REFERENCES lti_platforms (id)
);
INSERT INTO "lti_deployments" VALUES(1,'1:abc');
CREATE TABLE lti_line_items (
	platform_id INTEGER NOT NULL, 
	context_id VARCHAR(255) NOT NULL, 
	exercise VARCHAR(64) NOT NULL, 
	lineitem TEXT NOT NULL, 
	scopes TEXT DEFAULT '' NOT NULL, 
	updated_at TEXT NOT NULL, 
	PRIMARY KEY (platform_id, context_id, exercise), 
	FOREIGN KEY(platform_id) REFERENCES lti_platforms (id)
);
INSERT INTO "lti_line_items" VALUES(1,'course-7','continuous_batching','https://canvas.example.edu/lineitems/3','score lineitem','2026-12-01T10:00:00+00:00');
CREATE TABLE lti_members (
	platform_id INTEGER NOT NULL, 
	context_id VARCHAR(255) NOT NULL, 
	sub VARCHAR(255) NOT NULL, 
	PRIMARY KEY (platform_id, context_id, sub), 
	FOREIGN KEY(platform_id) REFERENCES lti_platforms (id)
);
INSERT INTO "lti_members" VALUES(1,'course-7','canvas-alice');
CREATE TABLE lti_nonces (
	nonce VARCHAR(64) NOT NULL, 
	state VARCHAR(64) NOT NULL, 
	platform_id INTEGER NOT NULL, 
	issued_at FLOAT NOT NULL, 
	used_at FLOAT, 
	PRIMARY KEY (nonce), 
	FOREIGN KEY(platform_id) REFERENCES lti_platforms (id)
);
CREATE TABLE lti_outbox (
	id INTEGER NOT NULL, 
	platform_id INTEGER NOT NULL, 
	lineitem TEXT NOT NULL, 
	sub VARCHAR(255) NOT NULL, 
	student_id VARCHAR(64) NOT NULL, 
	exercise VARCHAR(64) NOT NULL, 
	score FLOAT NOT NULL, 
	max_score FLOAT NOT NULL, 
	state VARCHAR(16) NOT NULL, 
	attempts INTEGER DEFAULT '0' NOT NULL, 
	next_try FLOAT NOT NULL, 
	last_error TEXT DEFAULT '' NOT NULL, 
	created_at TEXT NOT NULL, 
	sent_at TEXT, 
	PRIMARY KEY (id), 
	FOREIGN KEY(platform_id) REFERENCES lti_platforms (id)
);
INSERT INTO "lti_outbox" VALUES(1,1,'https://canvas.example.edu/lineitems/3','canvas-alice','alice','continuous_batching',11.0,10.0,'pending',2,1800000000.0,'the platform answered 503','2026-12-02T09:00:00+00:00',NULL);
CREATE TABLE lti_platforms (
	id INTEGER NOT NULL, 
	issuer TEXT NOT NULL, 
	client_id TEXT NOT NULL, 
	auth_login_url TEXT NOT NULL, 
	auth_token_url TEXT NOT NULL, 
	keyset_url TEXT NOT NULL, 
	tier VARCHAR(16) DEFAULT 'free' NOT NULL, 
	created_at TEXT NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (issuer, client_id)
);
INSERT INTO "lti_platforms" VALUES(1,'https://canvas.example.edu','10000000000042','https://canvas.example.edu/api/lti/authorize_redirect','https://canvas.example.edu/login/oauth2/token','https://canvas.example.edu/api/lti/security/jwks','premium','2026-12-07T12:00:28+00:00');
CREATE TABLE lti_users (
	platform_id INTEGER NOT NULL, 
	sub VARCHAR(255) NOT NULL, 
	role VARCHAR(16) NOT NULL, 
	student_id VARCHAR(64), 
	link_id INTEGER, 
	name TEXT DEFAULT '' NOT NULL, 
	PRIMARY KEY (platform_id, sub), 
	FOREIGN KEY(platform_id) REFERENCES lti_platforms (id), 
	FOREIGN KEY(student_id) REFERENCES students (id), 
	FOREIGN KEY(link_id) REFERENCES links (id)
);
INSERT INTO "lti_users" VALUES(1,'canvas-alice','student','alice',NULL,'Alice A.');
CREATE TABLE predictions (
	student_id VARCHAR(64) NOT NULL, 
	exercise VARCHAR(64) NOT NULL, 
	choice TEXT NOT NULL, 
	correct BOOLEAN NOT NULL, 
	answered_at TEXT NOT NULL, 
	PRIMARY KEY (student_id, exercise), 
	FOREIGN KEY(student_id) REFERENCES students (id)
);
CREATE TABLE scorecards (
	id INTEGER NOT NULL, 
	submission_id INTEGER NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	score INTEGER NOT NULL, 
	max_score INTEGER NOT NULL, 
	scorecard TEXT NOT NULL, 
	graded_at TEXT NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(submission_id) REFERENCES submissions (id)
);
INSERT INTO "scorecards" VALUES(1,1,'graded',3,10,'{"exercise":"continuous_batching","tier":"premium","submission_sha256":"alice-sha","status":"graded","score":3,"max_score":10,"tests":[],"locked":[],"reason":"","title":"","backend":"","isolation":"","graded_at":"","duration_s":0.0,"grader_version":"","seed":null,"suite_labels":{},"suite_visibility":{},"open_suites":[],"submission_file":"","exercise_fingerprint":"","diagnosis":[],"schema_version":1,"suites":{}}','2026-12-07T12:00:28+00:00');
INSERT INTO "scorecards" VALUES(2,1,'graded',9,10,'{"exercise":"continuous_batching","tier":"premium","submission_sha256":"alice-sha","status":"graded","score":9,"max_score":10,"tests":[],"locked":[],"reason":"","title":"","backend":"","isolation":"","graded_at":"","duration_s":0.0,"grader_version":"","seed":null,"suite_labels":{},"suite_visibility":{},"open_suites":[],"submission_file":"","exercise_fingerprint":"","diagnosis":[],"schema_version":1,"suites":{}}','2026-12-07T12:00:28+00:00');
INSERT INTO "scorecards" VALUES(3,2,'graded',4,10,'{"exercise":"continuous_batching","tier":"premium","submission_sha256":"bob-sha","status":"graded","score":4,"max_score":10,"tests":[],"locked":[],"reason":"","title":"","backend":"","isolation":"","graded_at":"","duration_s":0.0,"grader_version":"","seed":null,"suite_labels":{},"suite_visibility":{},"open_suites":[],"submission_file":"","exercise_fingerprint":"","diagnosis":[],"schema_version":1,"suites":{}}','2026-12-07T12:00:28+00:00');
INSERT INTO "scorecards" VALUES(4,3,'graded',5,10,'{"exercise":"continuous_batching","tier":"premium","submission_sha256":"zoë-sha","status":"graded","score":5,"max_score":10,"tests":[],"locked":[],"reason":"","title":"","backend":"","isolation":"","graded_at":"","duration_s":0.0,"grader_version":"","seed":null,"suite_labels":{},"suite_visibility":{},"open_suites":[],"submission_file":"","exercise_fingerprint":"","diagnosis":[],"schema_version":1,"suites":{}}','2026-12-07T12:00:28+00:00');
CREATE TABLE sessions (
	token_sha256 VARCHAR(64) NOT NULL, 
	link_id INTEGER NOT NULL, 
	csrf VARCHAR(64) NOT NULL, 
	created_at FLOAT NOT NULL, 
	expires_at FLOAT NOT NULL, 
	PRIMARY KEY (token_sha256), 
	FOREIGN KEY(link_id) REFERENCES links (id)
);
CREATE TABLE settings (
	"key" VARCHAR(64) NOT NULL, 
	value TEXT NOT NULL, 
	PRIMARY KEY ("key")
);
INSERT INTO "settings" VALUES('pseudonym_key','158b9ae4ae27822f92c60e79b4385a48');
INSERT INTO "settings" VALUES('session_key','42f9425c7e0e639ac26fb1ade8119d0619d939f4047e5abae5182702eb755db1');
INSERT INTO "settings" VALUES('lti_private_key','-----BEGIN PRIVATE KEY-----
MIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQCgU0zBS1UHmlOm
f6iz1Hu28GqPqN5vRov9+3kP73Bc0zj6va+bJxOk+Y+upBvu4fmF46v8Deg3oY5P
TdIKXGZ8XbA7J5PoRGzGm7ccOZYpBScAicl+rdp5IIbbuKlfOw2myZSgy0UToxqq
jbBwdiaDdbwj4PVk7i27ndJb0EEZWCGrOyC+utaZe1RL5FKN4FVSjZeGz4jfk6tW
tE6pym43Z+PY9KXQGsyFryonnccnFndNpbyW+QFsmVyRqLeLrLXqsRRtWArlUWb2
vK+25e0xOt0Pf4jxOrGdgFMYPjhCoWsfFtryyvhhWl9XDglgA+el9OuKhmHsx0HB
u/8GNSirAgMBAAECggEAF+pVGMBT/r5WnA+O6sRXcAKM4sEd7Rto5ooMlQPyjuYz
KbQB7fL2SzWu6S4xvICY6A/+J6sraKEAyXOiUUlXQFX5Y9mThqIuV7ICroMokxXh
q4LiO7NTU542f7AcE8iLUMXhFds8gqFh6O8Z0qzNMe7uEawM7vFYgRQZvPhjvZPb
ae8KC87jyMy4yL4bqD9V03LDqN41PfsVzTkJ4DNOfKpGTIJzpcggjALW/HsRxn3/
JkLZyJ3JX+jekCHTUkJhQReiOSxLcpG9Irq6imj5cDWfwpi+pmO633YdLseH5v+f
1eKJ4l5Ou5LTJC8FtIpow6gNWjbI4vRbkMJUO1fIAQKBgQDV8nRuzAcRiuu8pqYZ
HOlzJw0GD5+0wQQ4qMWoWZx2uBNMbU03jEPO/DbArxS8I6Y+UXEnoRZ7pxybsdlt
k6930kAjqIDD/ff9B6O2sXGxaf16H2/hJTH6BRMWLALr9dv3HADfl4EC6r907Dkw
zn8Ek9xOxFQ8lvejcng2Re3FawKBgQC/1qtbWmBnALich7vOA72IbycjYwbRSUnM
H+008ftNzyCPSDroz+Q7cD4YNJsa5NvBCzyKmsRNsA9wMYBt5PxQBVqlv9oWwAnQ
d+ZY1ZkA4T3OZtSLv2b0rwasqeiVPejjUV+6tFF4xBOd+nyZoJl845FA9QOOqhlm
CBeo+Bu5wQKBgAv0ZkkioWp7hryd2z4f/XNvxSyHhvcEqgW4eIL1ruZ7Vqi4ms31
ynwwX6bYoaH5o/prdpUuTSFPryuL/og+7lkVqHvVmIxbDpZW7PDybVXqhD1ksE22
VFqSGgTtJKSmsknWiL31q0HMeDJCWNe/Uh2hXXgRRFu2W9QIO2tc8PJNAoGBAK/M
7/elmNaLyKJZmPewYc5X3kwFgcflG6XeVCjC4INrnvDvRlz3trXppF3WR5WbyO7d
dzulnON8xokQNBuBTt+eKHXgnOFgVx4d4o/iHna580Pk5D60xorQopM0mZm6xGMc
vVeBy2+acEfDts+qZz4V5ZTbc8kXhHMGU3ha9j2BAoGBAIuKGl6YCds4LREvAMun
tz0zSGkJVJ6KGHM69yyGQDxjACZLjS2GjOCuH91NLAele66KUsAMc4cRitRYNIYS
PGt0oE9I6tnBwAcDPfshEOpGsjgiAMWtUrQuRpuWbsczXJZmADMTLMdQ8QyrdDxV
QZG8QZqajvpdcMBJyGUwmEvZ
-----END PRIVATE KEY-----
');
CREATE TABLE students (
	id VARCHAR(64) NOT NULL, 
	created_at TEXT NOT NULL, name TEXT DEFAULT '' NOT NULL, tier VARCHAR(16) DEFAULT 'free' NOT NULL, 
	PRIMARY KEY (id)
);
INSERT INTO "students" VALUES('alice','2026-12-07T12:00:28+00:00','','free');
INSERT INTO "students" VALUES('bob','2026-12-07T12:00:28+00:00','','free');
INSERT INTO "students" VALUES('zoë','2026-12-07T12:00:28+00:00','','free');
CREATE TABLE submissions (
	id INTEGER NOT NULL, 
	student_id VARCHAR(64) NOT NULL, 
	exercise TEXT NOT NULL, 
	tier VARCHAR(16) NOT NULL, 
	sha256 VARCHAR(64) NOT NULL, 
	filename TEXT NOT NULL, 
	content BLOB NOT NULL, 
	submitted_at TEXT NOT NULL, state VARCHAR(16) DEFAULT 'stored' NOT NULL, queued_at FLOAT, claim VARCHAR(64), lease_until FLOAT, attempts INTEGER DEFAULT '0' NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (student_id, exercise, tier, sha256), 
	FOREIGN KEY(student_id) REFERENCES students (id)
);
INSERT INTO "submissions" VALUES(1,'alice','continuous_batching','premium','alice-sha','scheduler.py',X'2320616C6963652773207363686564756C65720A4C494D4954203D20300A','2026-12-07T12:00:28+00:00','graded',NULL,NULL,NULL,0);
INSERT INTO "submissions" VALUES(2,'bob','continuous_batching','premium','bob-sha','scheduler.py',X'2320626F622773207363686564756C65720A4C494D4954203D20310A','2026-12-07T12:00:28+00:00','graded',NULL,NULL,NULL,0);
INSERT INTO "submissions" VALUES(3,'zoë','continuous_batching','premium','zoë-sha','scheduler.py',X'23207A6FC3AB2773207363686564756C65720A4C494D4954203D20320A','2026-12-07T12:00:28+00:00','graded',NULL,NULL,NULL,0);
INSERT INTO "submissions" VALUES(4,'bob','continuous_batching','premium','bob-sha-2','scheduler.py',X'4C494D4954203D2039390A','2026-12-07T12:00:28+00:00','queued',NULL,NULL,NULL,0);
CREATE INDEX submissions_by_exercise ON submissions (exercise, student_id);
CREATE INDEX submissions_by_state ON submissions (state, queued_at);
CREATE INDEX submissions_by_student ON submissions (student_id, submitted_at);
CREATE INDEX scorecards_by_submission ON scorecards (submission_id, id);
PRAGMA user_version = 6;
COMMIT;
