module github.com/onsale/onsale/gateway

go 1.26.8

require github.com/onsale/onsale/shared v0.0.0

require github.com/golang-jwt/jwt/v5 v5.3.1 // indirect

replace github.com/onsale/onsale/shared => ../shared
