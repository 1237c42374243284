module github.com/hookline/hookline/rest

go 1.14
