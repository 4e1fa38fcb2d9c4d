module github.com/kropsdev/krops/tools/crds

go 1.26.0
